//! The controllers: claims, pools, and the watches that feed the index.

pub mod claim;
pub mod context;
pub mod discovery;
pub mod error;
pub mod feed;
pub mod finalizers;
pub mod pool;
pub mod run;

pub use context::Context;
pub use error::Error;
