//! The controllers' error type. Its variants double as the `error` label of metrics.

use std::time::Duration;

/// What went wrong in a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request; retried with backoff.
    #[error("{action}: {}", describe(source))]
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

    /// The misconfiguration this failure shows, if no retry can fix it.
    pub fn problem(&self) -> Option<crate::misconfig::Problem> {
        match self {
            Error::Kube { source, .. } => crate::misconfig::reconcile_problem(source),
            Error::Invalid(_) => None,
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

pub use crate::client::api_errors::{describe, is_conflict, is_fenced, status_code};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_error_reads_as_its_message_without_the_status_struct() {
        let status = kube::core::Status::failure("the object has been modified", "Conflict").with_code(409);
        let error = Error::kube("updating finalizers of IPAddressClaim c-1", kube::Error::Api(status.boxed()));
        let text = error.to_string();
        assert_eq!(text, "updating finalizers of IPAddressClaim c-1: the object has been modified (409 Conflict)");
        assert_eq!(error.metric_label(), "conflict");
    }
}
