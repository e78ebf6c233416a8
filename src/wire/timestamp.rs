//! `google.protobuf.Timestamp` with ProtoJSON's string form.
//!
//! Output is RFC 3339 in UTC with a `Z` and 3, 6 or 9 fractional digits: milliseconds
//! as A2A asks (`2026-01-15T10:30:00.000Z`), more only when needed to keep the value
//! exact (ProtoJSON allows 0, 3, 6 or 9). Input is any RFC 3339 offset, converted to UTC.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Seconds and nanoseconds since the Unix epoch, as in `google/protobuf/timestamp.proto`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the range ProtoJSON allows.
const MIN_SECONDS: i64 = -62_135_596_800;
const MAX_SECONDS: i64 = 253_402_300_799;

impl Timestamp {
    /// Milliseconds since the Unix epoch; the store keeps times in this unit.
    pub fn from_unix_millis(millis: i64) -> Self {
        Timestamp {
            seconds: millis.div_euclid(1000),
            nanos: (millis.rem_euclid(1000) * 1_000_000) as i32,
        }
    }

    /// The same instant in whole milliseconds (sub-millisecond digits are dropped).
    pub fn to_unix_millis(self) -> i64 {
        self.seconds * 1000 + i64::from(self.nanos) / 1_000_000
    }

    fn to_datetime(self) -> Option<DateTime<Utc>> {
        if !(MIN_SECONDS..=MAX_SECONDS).contains(&self.seconds)
            || !(0..1_000_000_000).contains(&self.nanos)
        {
            return None;
        }
        DateTime::from_timestamp(self.seconds, self.nanos as u32)
    }

    /// Parses any RFC 3339 timestamp (any offset) into UTC.
    pub fn parse_rfc3339(text: &str) -> Result<Self, String> {
        let parsed = DateTime::parse_from_rfc3339(text).map_err(|e| {
            format!("`{text}` is not an RFC 3339 timestamp like 2026-01-15T10:30:00.000Z ({e})")
        })?;
        let utc = parsed.with_timezone(&Utc);
        let ts = Timestamp {
            seconds: utc.timestamp(),
            nanos: utc.timestamp_subsec_nanos() as i32,
        };
        if !(MIN_SECONDS..=MAX_SECONDS).contains(&ts.seconds) {
            return Err(format!(
                "`{text}` is outside 0001-01-01T00:00:00Z..9999-12-31T23:59:59Z"
            ));
        }
        Ok(ts)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(dt) = self.to_datetime() else {
            return write!(f, "<invalid timestamp {}s {}ns>", self.seconds, self.nanos);
        };
        let digits = if self.nanos % 1_000_000 == 0 {
            SecondsFormat::Millis
        } else if self.nanos % 1_000 == 0 {
            SecondsFormat::Micros
        } else {
            SecondsFormat::Nanos
        };
        f.write_str(&dt.to_rfc3339_opts(digits, true))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.to_datetime().is_none() {
            return Err(serde::ser::Error::custom(format!(
                "timestamp {}s {}ns is outside the range ProtoJSON can write",
                self.seconds, self.nanos
            )));
        }
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TimestampVisitor;
        impl Visitor<'_> for TimestampVisitor {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Timestamp, E> {
                Timestamp::parse_rfc3339(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(TimestampVisitor)
    }
}
