//! Compact forms of the text every object carries, shared by the claim store's and the
//! `IPAddress` cache's records: a uid as its 16 bytes and a `resourceVersion` as its number when
//! the text is their canonical spelling, else the text as it came, so that each is written back
//! exactly as it was read; metadata times as their seconds.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::fmt::strtime;

/// Text kept as it was served, where it has no exact compact form. Seldom seen, so held
/// behind one thin pointer rather than a wide one: it costs the record 8 bytes, not 16.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
            Uid::Uuid(bytes) => uuid_text(*bytes),
            Uid::Verbatim(text) => text.as_str().to_owned(),
        }
    }
}

/// The canonical spelling of a UUID's bits.
pub fn uuid_text(bytes: [u8; 16]) -> String {
    let hex = format!("{:032x}", u128::from_be_bytes(bytes));
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// A UUID's bits as bytes, when `text` is its canonical spelling.
pub fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    parse_uuid(text).map(u128::to_be_bytes)
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

/// A `resourceVersion`'s number, when `text` is its spelling (no sign, no leading zero).
pub fn version_number(text: &str) -> Option<u64> {
    text.parse::<u64>().ok().filter(|number| number.to_string() == text)
}

/// How a record's shape says where a text is kept that usually has a compact form (a uid's
/// bytes, a `resourceVersion`'s number): in the record's own field, nowhere (the object has
/// none), or here, as it came, when it has no exact compact form. The rare text then makes the
/// shape the record's own; the common case costs the shape nothing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kept {
    InRecord,
    Absent,
    Verbatim(Verbatim),
}

impl Kept {
    /// Where `text` is kept, and its compact form when the record keeps it.
    pub fn of<T>(text: Option<&str>, compact: impl FnOnce(&str) -> Option<T>) -> (Kept, Option<T>) {
        match text {
            None => (Kept::Absent, None),
            Some(text) => match compact(text) {
                Some(value) => (Kept::InRecord, Some(value)),
                None => (Kept::Verbatim(Verbatim::new(text)), None),
            },
        }
    }

    /// The text again, given the record's field and how to spell it.
    pub fn text<T>(&self, in_record: T, spell: impl FnOnce(T) -> String) -> Option<String> {
        match self {
            Kept::InRecord => Some(spell(in_record)),
            Kept::Absent => None,
            Kept::Verbatim(text) => Some(text.as_str().to_owned()),
        }
    }
}

/// A metadata time (`creationTimestamp`, `deletionTimestamp`) as whole seconds since the epoch,
/// or none. The API serves these times to the second and [`Time`] writes them to the second, so
/// the seconds are all there is to keep: 8 bytes where an `Option<Time>` takes 16.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stamp(i64);

impl Stamp {
    /// No time: outside the range of any [`Timestamp`], so no time is mistaken for it.
    const NONE: i64 = i64::MIN;

    pub fn new(time: Option<&Time>) -> Stamp {
        Stamp(time.map_or(Stamp::NONE, |time| time.0.as_second()))
    }

    pub fn time(self) -> Option<Time> {
        (self.0 != Stamp::NONE).then(|| Timestamp::from_second(self.0).ok().map(Time)).flatten()
    }
}

/// A time held as text in an object (a condition's `lastTransitionTime`): its seconds when the
/// text is the API's own spelling of them (`2026-01-02T03:04:05Z`), the instant when the text is
/// how it is spelled with its fraction (`2026-01-02T03:04:05.25Z`, as a client that writes
/// sub-second times spells it), else the text as it came.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TimeText {
    At(Stamp),
    Precise(Timestamp),
    Verbatim(Verbatim),
}

/// How the API spells a time to the second.
const SECONDS: &str = "%Y-%m-%dT%H:%M:%SZ";

impl TimeText {
    pub fn new(text: &str) -> TimeText {
        let Ok(at) = text.parse::<Timestamp>() else {
            return TimeText::Verbatim(Verbatim::new(text));
        };
        if strtime::format(SECONDS, at).ok().as_deref() == Some(text) {
            TimeText::At(Stamp(at.as_second()))
        } else if at.to_string() == text {
            TimeText::Precise(at)
        } else {
            TimeText::Verbatim(Verbatim::new(text))
        }
    }

    pub fn text(&self) -> String {
        match self {
            // A stamp is only made from a time that was just formatted with `SECONDS`.
            TimeText::At(stamp) => stamp.time().and_then(|at| strtime::format(SECONDS, at.0).ok()).unwrap_or_default(),
            TimeText::Precise(at) => at.to_string(),
            TimeText::Verbatim(text) => text.as_str().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_gives_back_the_time_it_was_made_from_and_none_stays_none() {
        let times = ["2026-01-02T03:04:05Z", "1970-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "2999-12-31T23:59:59Z"];
        for text in times {
            let time = Time(text.parse().expect("a time"));
            assert_eq!(Stamp::new(Some(&time)).time(), Some(time), "{text}");
        }
        assert_eq!(Stamp::new(None).time(), None);
        assert_eq!(size_of::<Stamp>(), 8);
    }

    /// How each spelling is kept: the API's (seconds), a fraction jiff spells back the same (the
    /// instant), anything else (the text). Every one comes back as it came.
    #[test]
    fn a_time_text_is_kept_in_the_most_compact_form_that_spells_it_back() {
        #[derive(Debug, PartialEq)]
        enum Form {
            Seconds,
            Instant,
            Text,
        }
        for (text, form) in [
            ("2026-01-02T03:04:05Z", Form::Seconds),
            ("1970-01-01T00:00:00Z", Form::Seconds),
            ("2026-01-02T03:04:05.5Z", Form::Instant),
            ("2026-12-06T22:45:01.123456789Z", Form::Instant),
            ("2026-01-02T03:04:05.500Z", Form::Text),
            ("2026-01-02T03:04:05+00:00", Form::Text),
            ("2026-01-02T03:04:05.5+00:00", Form::Text),
            ("2026-01-02t03:04:05z", Form::Text),
            ("yesterday", Form::Text),
            ("", Form::Text),
        ] {
            let kept = TimeText::new(text);
            let found = match kept {
                TimeText::At(_) => Form::Seconds,
                TimeText::Precise(_) => Form::Instant,
                TimeText::Verbatim(_) => Form::Text,
            };
            assert_eq!(found, form, "{text}");
            assert_eq!(kept.text(), text);
        }
    }
}
