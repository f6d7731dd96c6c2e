//! What an API error means and how a person reads it (no client required).

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
