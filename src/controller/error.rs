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

/// An error as a person reads it: for an API server's answer its message, code and reason
/// (kube's own text carries the whole `Status` in debug form); otherwise kube's text.
pub fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let reason = status.reason.as_str();
            match (status.message.is_empty(), reason.is_empty()) {
                (true, _) => format!("the API server answered {} {reason}", status.code),
                (false, true) => format!("{} ({})", status.message, status.code),
                (false, false) => format!("{} ({} {reason})", status.message, status.code),
            }
        }
        other => other.to_string(),
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
