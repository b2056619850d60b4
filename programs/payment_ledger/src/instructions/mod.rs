pub mod initialize;
pub mod open_invocation;
pub mod record_attested_payment;
pub mod record_payment;

pub use initialize::*;
pub use open_invocation::*;
pub use record_attested_payment::*;
pub use record_payment::*;
