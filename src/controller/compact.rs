//! Compact forms of the text every object carries, shared by the claim store's and the
//! `IPAddress` cache's records: a uid as its 16 bytes and a `resourceVersion` as its number when
//! the text is their canonical spelling, else the text as it came, so that each is written back
//! exactly as it was read.

/// Text kept as it was served, where it has no exact compact form. Seldom seen, so held
/// behind one thin pointer rather than a wide one: it costs the record 8 bytes, not 16.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verbatim(Box<Box<str>>);

impl Verbatim {
    pub fn new(text: &str) -> Verbatim {
        Verbatim(Box::new(text.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A UID: the 128 bits of a canonical UUID (lowercase, 8-4-4-4-12), which Kubernetes gives
/// every object, or any other text as it came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uid {
    /// The UUID's bits, as bytes: a `u128` would align the whole record to 16 bytes.
    Uuid([u8; 16]),
    Verbatim(Verbatim),
}

impl Uid {
    pub fn new(text: &str) -> Uid {
        match parse_uuid(text) {
            Some(bits) => Uid::Uuid(bits.to_be_bytes()),
            None => Uid::Verbatim(Verbatim::new(text)),
        }
    }

    pub fn text(&self) -> String {
        match self {
            Uid::Uuid(bytes) => {
                let hex = format!("{:032x}", u128::from_be_bytes(*bytes));
                format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
            }
            Uid::Verbatim(text) => text.as_str().to_owned(),
        }
    }
}

/// The bits of a canonical UUID; none for any other text, even one that would parse to the
/// same bits (uppercase, braces), since it could not be written back as it came.
pub fn parse_uuid(text: &str) -> Option<u128> {
    const DASHES: [usize; 4] = [8, 13, 18, 23];
    let canonical = text.len() == 36
        && text.bytes().enumerate().all(|(at, byte)| match DASHES.contains(&at) {
            true => byte == b'-',
            false => matches!(byte, b'0'..=b'9' | b'a'..=b'f'),
        });
    canonical.then(|| u128::from_str_radix(&text.replace('-', ""), 16).ok()).flatten()
}

/// A `resourceVersion`: the number etcd gives it, or any other text as it came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Version {
    Number(u64),
    Verbatim(Verbatim),
}

impl Version {
    pub fn new(text: &str) -> Version {
        match text.parse::<u64>() {
            Ok(number) if number.to_string() == text => Version::Number(number),
            _ => Version::Verbatim(Verbatim::new(text)),
        }
    }

    pub fn text(&self) -> String {
        match self {
            Version::Number(number) => number.to_string(),
            Version::Verbatim(text) => text.as_str().to_owned(),
        }
    }
}
