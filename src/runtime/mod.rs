//! What a running process needs whatever it does: logging that can neither stall nor kill it,
//! metrics, trust for outgoing TLS, the loop of a periodic service and whether this node leads
//! them, and the supervision of its tasks.

pub mod leadership;
pub mod logging;
pub mod metrics;
pub mod periodic;
pub mod supervisor;
pub mod tls;
