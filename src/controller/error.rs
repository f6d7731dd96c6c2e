//! The controllers' error type. Its variants double as the `error` label of metrics.

use std::time::Duration;

/// What went wrong in a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request; retried with backoff.
    #[error("{action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: Box<kube::Error>,
    },
    /// An object is not as ferro-ipam expects; waits for the object to change.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube { action: action.into(), source: Box::new(source) }
    }

    /// A short, stable name for logs and metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { source, .. } if is_conflict(source) => "conflict",
            Error::Kube { source, .. } if is_fenced(source) => "fenced",
            Error::Kube { .. } => "api",
            Error::Invalid(_) => "invalid",
        }
    }

    /// How soon to try again.
    pub fn retry_after(&self) -> Duration {
        match self {
            // Someone else wrote the object first: the watch brings the new version at once.
            Error::Kube { source, .. } if is_conflict(source) => Duration::from_millis(200),
            // The term was suspended mid-reconcile: the next attempt waits for the fence.
            Error::Kube { source, .. } if is_fenced(source) => Duration::from_millis(200),
            Error::Kube { .. } => Duration::from_secs(5),
            Error::Invalid(_) => Duration::from_secs(300),
        }
    }
}

/// The API server's HTTP status for an error, if it answered.
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

pub fn is_conflict(error: &kube::Error) -> bool {
    status_code(error) == Some(409)
}

/// Whether the write fence refused the request (the leader's term is suspended).
pub fn is_fenced(error: &kube::Error) -> bool {
    match error {
        kube::Error::Service(source) => source.is::<crate::client::Fenced>(),
        _ => false,
    }
}

pub fn is_not_found(error: &kube::Error) -> bool {
    status_code(error) == Some(404)
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
