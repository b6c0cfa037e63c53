mod rfc2234;
mod rfc2822;
mod rfc5336;

pub(crate) use rfc2822::{mailbox, mailbox_list};
