//! `google.protobuf.Timestamp` with ProtoJSON's string form.
//!
//! Output is RFC 3339 in UTC with a `Z` and 3, 6 or 9 fractional digits: milliseconds
//! as A2A asks (`2026-01-15T10:30:00.000Z`), more only when needed to keep the value
//! exact (ProtoJSON allows 0, 3, 6 or 9). Input is any RFC 3339 offset, converted to UTC.
//!
//! Written by [`Timestamp::rfc3339`] straight from the seconds (a civil-from-days
//! conversion and fixed digits), not through chrono: a stream writes a timestamp per status
//! frame, and chrono's general formatter (a `String` per timestamp, then written again
//! through serde's `collect_str`) was ~3k instructions of each, 2% of a stream's server
//! work. The test `timestamps_are_written_as_chrono_writes_them` holds it to chrono's text.

use std::fmt;

use chrono::{DateTime, Utc};
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

    /// Whether ProtoJSON can write it: 0001-01-01T00:00:00Z..=9999-12-31T23:59:59.999999999Z.
    fn in_range(self) -> bool {
        (MIN_SECONDS..=MAX_SECONDS).contains(&self.seconds)
            && (0..1_000_000_000).contains(&self.nanos)
    }

    /// The RFC 3339 text in UTC (`2026-01-15T10:30:00.000Z`), with 3, 6 or 9 fractional
    /// digits, as few as keep it exact; `None` outside the range ProtoJSON allows.
    pub fn rfc3339(self) -> Option<Rfc3339> {
        if !self.in_range() {
            return None;
        }
        let (days, second_of_day) = (
            self.seconds.div_euclid(86_400),
            self.seconds.rem_euclid(86_400),
        );
        let (year, month, day) = civil_from_days(days);
        let nanos = self.nanos as u32;
        let (fraction, digits) = if nanos.is_multiple_of(1_000_000) {
            (nanos / 1_000_000, 3)
        } else if nanos.is_multiple_of(1_000) {
            (nanos / 1_000, 6)
        } else {
            (nanos, 9)
        };
        let mut text = Rfc3339 {
            bytes: *b"0000-00-00T00:00:00.000000000Z",
            len: 20 + digits + 1,
        };
        let b = &mut text.bytes;
        put_digits(&mut b[0..4], year as u32);
        put_digits(&mut b[5..7], month);
        put_digits(&mut b[8..10], day);
        put_digits(&mut b[11..13], (second_of_day / 3600) as u32);
        put_digits(&mut b[14..16], (second_of_day / 60 % 60) as u32);
        put_digits(&mut b[17..19], (second_of_day % 60) as u32);
        put_digits(&mut b[20..20 + digits], fraction);
        b[20 + digits] = b'Z';
        Some(text)
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

/// A timestamp's RFC 3339 text ([`Timestamp::rfc3339`]): at most 30 ASCII bytes, no heap.
pub struct Rfc3339 {
    bytes: [u8; 30],
    len: usize,
}

impl Rfc3339 {
    pub fn as_str(&self) -> &str {
        // Only ASCII digits, `-`, `T`, `:`, `.` and `Z` are ever written.
        std::str::from_utf8(&self.bytes[..self.len]).expect("RFC 3339 text is ASCII")
    }
}

/// Writes `value` as `out.len()` decimal digits, zero-padded (`value` fits).
fn put_digits(out: &mut [u8], mut value: u32) {
    for digit in out.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// (year, month, day) of the proleptic Gregorian calendar for `days` since 1970-01-01
/// (Howard Hinnant's `civil_from_days`, exact for every day ProtoJSON allows).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097); // [0, 146096]
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153; // [0, 11], 0 = March
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rfc3339() {
            Some(text) => f.write_str(text.as_str()),
            None => write!(f, "<invalid timestamp {}s {}ns>", self.seconds, self.nanos),
        }
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.rfc3339() {
            Some(text) => serializer.serialize_str(text.as_str()),
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
    use chrono::SecondsFormat;

    /// chrono's text for `ts`: what this module wrote before it wrote its own.
    fn chrono_text(ts: Timestamp) -> String {
        let digits = if ts.nanos % 1_000_000 == 0 {
            SecondsFormat::Millis
        } else if ts.nanos % 1_000 == 0 {
            SecondsFormat::Micros
        } else {
            SecondsFormat::Nanos
        };
        DateTime::from_timestamp(ts.seconds, ts.nanos as u32)
            .unwrap()
            .to_rfc3339_opts(digits, true)
    }

    #[test]
    fn timestamps_are_written_as_chrono_writes_them() {
        let mut cases = vec![
            Timestamp {
                seconds: MIN_SECONDS,
                nanos: 0,
            },
            Timestamp {
                seconds: MAX_SECONDS,
                nanos: 999_999_999,
            },
            Timestamp {
                seconds: 0,
                nanos: 0,
            },
            Timestamp {
                seconds: -1,
                nanos: 999_000_000,
            },
            Timestamp::from_unix_millis(951_782_400_000), // 2000-02-29
            Timestamp::from_unix_millis(-2_203_891_200_000), // 1900-03-01
            Timestamp::from_unix_millis(1_768_473_000_123),
        ];
        // Every day of 1896..=2104 (leap and century years), at a varying time of day.
        for day in -27_029..49_000i64 {
            cases.push(Timestamp {
                seconds: day * 86_400 + (day * 7_919).rem_euclid(86_400),
                nanos: 0,
            });
        }
        // Spread over the whole range, with each kind of fraction.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let span = (MAX_SECONDS - MIN_SECONDS + 1) as u64;
            let nanos = (x >> 20) as u32 % 1_000_000_000;
            cases.push(Timestamp {
                seconds: MIN_SECONDS + (x % span) as i64,
                nanos: match i % 4 {
                    0 => 0,
                    1 => nanos / 1_000_000 * 1_000_000,
                    2 => nanos / 1_000 * 1_000,
                    _ => nanos,
                } as i32,
            });
        }
        for ts in cases {
            let ours = ts.rfc3339().expect("in range").as_str().to_string();
            assert_eq!(ours, chrono_text(ts), "{ts:?}");
            assert_eq!(Timestamp::parse_rfc3339(&ours), Ok(ts), "{ours}");
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
