//! `google.protobuf.Timestamp` with ProtoJSON's string form.
//!
//! Output is RFC 3339 in UTC with a `Z` and 3, 6 or 9 fractional digits: milliseconds
//! as A2A asks (`2026-01-15T10:30:00.000Z`), more only when needed to keep the value
//! exact (ProtoJSON allows 0, 3, 6 or 9). Input is any RFC 3339 offset, converted to UTC.
//! chrono reads and writes the text.

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

    /// The instant, if ProtoJSON can write it:
    /// 0001-01-01T00:00:00Z..=9999-12-31T23:59:59.999999999Z.
    fn to_datetime(self) -> Option<DateTime<Utc>> {
        if !(MIN_SECONDS..=MAX_SECONDS).contains(&self.seconds)
            || !(0..1_000_000_000).contains(&self.nanos)
        {
            return None;
        }
        DateTime::from_timestamp(self.seconds, self.nanos as u32)
    }

    /// The RFC 3339 text in UTC (`2026-01-15T10:30:00.000Z`), with 3, 6 or 9 fractional
    /// digits, as few as keep it exact; `None` outside the range ProtoJSON allows.
    pub fn rfc3339(self) -> Option<String> {
        let digits = if self.nanos % 1_000_000 == 0 {
            SecondsFormat::Millis
        } else if self.nanos % 1_000 == 0 {
            SecondsFormat::Micros
        } else {
            SecondsFormat::Nanos
        };
        Some(self.to_datetime()?.to_rfc3339_opts(digits, true))
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
        match self.rfc3339() {
            Some(text) => f.write_str(&text),
            None => write!(f, "<invalid timestamp {}s {}ns>", self.seconds, self.nanos),
        }
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.rfc3339() {
            Some(text) => serializer.serialize_str(&text),
            None => Err(serde::ser::Error::custom(format!(
                "timestamp {}s {}ns is outside the range ProtoJSON can write",
                self.seconds, self.nanos
            ))),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_written_in_utc_with_z_and_3_6_or_9_fraction_digits() {
        let at = |seconds, nanos| Timestamp { seconds, nanos };
        let known = [
            (at(MIN_SECONDS, 0), "0001-01-01T00:00:00.000Z"),
            (
                at(MAX_SECONDS, 999_999_999),
                "9999-12-31T23:59:59.999999999Z",
            ),
            (at(0, 0), "1970-01-01T00:00:00.000Z"),
            (at(-1, 999_000_000), "1969-12-31T23:59:59.999Z"),
            (at(951_782_400, 120_000), "2000-02-29T00:00:00.000120Z"),
            (at(1_768_473_000, 5), "2026-01-15T10:30:00.000000005Z"),
            (
                Timestamp::from_unix_millis(-2_203_891_200_000),
                "1900-03-01T00:00:00.000Z",
            ),
        ];
        for (ts, text) in known {
            assert_eq!(ts.rfc3339().as_deref(), Some(text), "{ts:?}");
        }
        // Spread over the whole range, with each kind of fraction: UTC with `Z`, the fewest
        // of 3, 6 or 9 digits that keep the nanoseconds, and read back as the same instant.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..100_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let span = (MAX_SECONDS - MIN_SECONDS + 1) as u64;
            let nanos = (x >> 20) as u32 % 1_000_000_000;
            let nanos = match i % 4 {
                0 => 0,
                1 => nanos / 1_000_000 * 1_000_000,
                2 => nanos / 1_000 * 1_000,
                _ => nanos,
            };
            let ts = at(MIN_SECONDS + (x % span) as i64, nanos as i32);
            let text = ts.rfc3339().expect("in range");
            let (whole, fraction) = text.strip_suffix('Z').unwrap().split_once('.').unwrap();
            assert_eq!(whole.len(), "0001-01-01T00:00:00".len(), "{text}");
            let fewest = if nanos % 1_000_000 == 0 {
                3
            } else if nanos % 1_000 == 0 {
                6
            } else {
                9
            };
            assert_eq!(fraction.len(), fewest, "{text}");
            assert_eq!(Timestamp::parse_rfc3339(&text), Ok(ts), "{text}");
        }
    }

    #[test]
    fn timestamps_outside_protojsons_range_are_not_written() {
        for ts in [
            Timestamp {
                seconds: MIN_SECONDS - 1,
                nanos: 999_999_999,
            },
            Timestamp {
                seconds: MAX_SECONDS + 1,
                nanos: 0,
            },
            Timestamp {
                seconds: 0,
                nanos: -1,
            },
            Timestamp {
                seconds: 0,
                nanos: 1_000_000_000,
            },
        ] {
            assert!(ts.rfc3339().is_none(), "{ts:?}");
            assert!(serde_json::to_string(&ts).is_err(), "{ts:?}");
            assert!(ts.to_string().starts_with("<invalid timestamp"), "{ts:?}");
        }
    }
}
