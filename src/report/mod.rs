//! What a job makes of its report: the schedule's fires, the report's data and whether it is
//! ready, the render (and its charts), and the immutable artifact that holds it; the catalog of the reports in
//! force.

pub mod artifact;
pub mod catalog;
pub mod chart;
pub mod readiness;
pub mod render;
pub mod schedule;
pub mod source;
