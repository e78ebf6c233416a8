//! The compact JSON writer behind [`super::json::encode_into`]: a serde `Serializer` that
//! appends to a `Vec<u8>`, writing what `serde_json` with the ProtoJSON number rule writes,
//! byte for byte, only faster.
//!
//! Why not `serde_json::Serializer`: its string escaping steps through a string byte by
//! byte, and every key, id, text and timestamp of every response goes through it: a
//! stream's four frames hold ~56 strings, ~930 bytes, and escaping them was ~11k
//! instructions of the ~390k a streamed request costs the server (`callgrind`, one core).
//! Here a string that needs no escaping (nearly every one: ids, keys, enum names,
//! timestamps, plain text) is recognised eight bytes at a time and copied whole; one that
//! does goes byte by byte with serde_json's escapes. Numbers are written by serde_json's
//! own formatter, so they cannot differ.
//!
//! The golden tests (`tests/wire_protojson.rs`) hold every document they write to
//! serde_json's text, and `strings_are_escaped_as_serde_json_escapes_them` every kind of
//! string.

use std::fmt;
use std::io;

use serde::ser::{self, Serialize};
use serde_json::ser::{CompactFormatter, Formatter};

use super::MAX_EXACT_INTEGER;

/// Writes serde values as compact JSON onto `out`.
pub struct Writer<'a> {
    pub out: &'a mut Vec<u8>,
}

/// Why a value cannot be written (only what a wire type never holds: a map key that is not
/// a string, or an error the value's own `Serialize` reports).
#[derive(Debug)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// Writing to a `Vec` cannot fail; serde_json's formatter still returns `io::Result`.
fn infallible(result: io::Result<()>) {
    debug_assert!(result.is_ok());
}

/// Writes a double as ProtoJSON wants it: integral values within ±[`MAX_EXACT_INTEGER`]
/// without `.0` (`42`, not `42.0`), so clients that compare text or types see what they
/// sent; others as serde_json writes them (`null` for NaN and infinities).
pub fn write_f64(out: &mut Vec<u8>, value: f64) {
    if !value.is_finite() {
        out.extend_from_slice(b"null");
    } else if value.fract() == 0.0 && value.abs() <= MAX_EXACT_INTEGER {
        infallible(CompactFormatter.write_i64(out, value as i64));
    } else {
        infallible(CompactFormatter.write_f64(out, value));
    }
}

/// By byte: which bytes a JSON string must escape, and how (`u` for `\u00XX`).
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0A] = b'n';
    table[0x0C] = b'f';
    table[0x0D] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Which of the eight bytes in `word` need escaping (their high bits set; 0: none): a
/// control byte (< 0x20), `"` or `\`. Exact for "any": each test is the classic "has a
/// byte below n" / "has a zero byte" word trick, which never misses a byte.
fn word_escapes(word: u64) -> u64 {
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let has_quote = quote.wrapping_sub(ONES) & !quote & HIGH;
    let has_backslash = backslash.wrapping_sub(ONES) & !backslash & HIGH;
    below_space | has_quote | has_backslash
}

/// Whether `bytes` holds no byte a JSON string must escape: eight bytes at a time, the last
/// few one by one.
fn needs_no_escape(bytes: &[u8]) -> bool {
    let mut chunks = bytes.chunks_exact(8);
    let mut escapes = 0;
    for chunk in &mut chunks {
        escapes |= word_escapes(u64::from_le_bytes(chunk.try_into().expect("eight bytes")));
    }
    let rest = chunks
        .remainder()
        .iter()
        .fold(0, |any, &byte| any | ESCAPE[byte as usize]);
    escapes == 0 && rest == 0
}

/// Appends `text` as a JSON string, escaped as serde_json escapes it.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    if needs_no_escape(bytes) {
        out.extend_from_slice(bytes);
    } else {
        write_escaped(out, bytes);
    }
    out.push(b'"');
}

/// Appends `bytes` (UTF-8) escaped, byte by byte; runs between escapes are copied whole.
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut run_start = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let escape = ESCAPE[byte as usize];
        if escape == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[run_start..i]);
        if escape == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(byte >> 4) as usize],
                HEX[(byte & 0xF) as usize],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', escape]);
        }
        run_start = i + 1;
    }
    out.extend_from_slice(&bytes[run_start..]);
}

impl<'a, 'w> ser::Serializer for &'w mut Writer<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'w>;
    type SerializeTuple = Compound<'a, 'w>;
    type SerializeTupleStruct = Compound<'a, 'w>;
    type SerializeTupleVariant = Compound<'a, 'w>;
    type SerializeMap = Compound<'a, 'w>;
    type SerializeStruct = Compound<'a, 'w>;
    type SerializeStructVariant = Compound<'a, 'w>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if v { b"true" as &[u8] } else { b"false" });
        Ok(())
    }

    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }

    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }

    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }

    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        infallible(CompactFormatter.write_i64(self.out, v));
        Ok(())
    }

    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        infallible(CompactFormatter.write_i128(self.out, v));
        Ok(())
    }

    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }

    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }

    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }

    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        infallible(CompactFormatter.write_u64(self.out, v));
        Ok(())
    }

    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        infallible(CompactFormatter.write_u128(self.out, v));
        Ok(())
    }

    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if v.is_finite() {
            infallible(CompactFormatter.write_f32(self.out, v));
        } else {
            self.out.extend_from_slice(b"null");
        }
        Ok(())
    }

    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        write_f64(self.out, v);
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        // As serde_json: an array of numbers (ProtoJSON's `bytes` are base64 strings,
        // which the generated code writes with `serialize_str`).
        let mut seq = ser::Serializer::serialize_seq(self, Some(v.len()))?;
        for byte in v {
            ser::SerializeSeq::serialize_element(&mut seq, byte)?;
        }
        ser::SerializeSeq::end(seq)
    }

    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }

    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a, 'w>, Error> {
        self.out.push(b'[');
        Ok(Compound::new(self, b']', false))
    }

    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, 'w>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'w>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, 'w>, Error> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.extend_from_slice(b":[");
        Ok(Compound::new(self, b']', true))
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a, 'w>, Error> {
        self.out.push(b'{');
        Ok(Compound::new(self, b'}', false))
    }

    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Compound<'a, 'w>, Error> {
        self.serialize_map(Some(len))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, 'w>, Error> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.extend_from_slice(b":{");
        Ok(Compound::new(self, b'}', true))
    }
}

/// An array or object being written.
pub struct Compound<'a, 'w> {
    writer: &'w mut Writer<'a>,
    first: bool,
    /// `]` or `}`.
    close: u8,
    /// Inside `{"variant": …}`: one more `}` at the end.
    in_variant: bool,
}

impl<'a, 'w> Compound<'a, 'w> {
    fn new(writer: &'w mut Writer<'a>, close: u8, in_variant: bool) -> Self {
        Compound {
            writer,
            first: true,
            close,
            in_variant,
        }
    }

    fn comma(&mut self) {
        if !std::mem::replace(&mut self.first, false) {
            self.writer.out.push(b',');
        }
    }

    fn element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.comma();
        value.serialize(&mut *self.writer)
    }

    fn field<T: ?Sized + Serialize>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        self.comma();
        write_str(self.writer.out, key);
        self.writer.out.push(b':');
        value.serialize(&mut *self.writer)
    }

    fn close(self) -> Result<(), Error> {
        self.writer.out.push(self.close);
        if self.in_variant {
            self.writer.out.push(b'}');
        }
        Ok(())
    }
}

/// The array-like compounds: each element after a comma, then `]`.
macro_rules! array_compound {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = Error;

            fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }

            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

array_compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), Error> {
        self.comma();
        key.serialize(MapKey(self.writer.out))?;
        self.writer.out.push(b':');
        Ok(())
    }

    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.writer)
    }

    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

/// The struct-like compounds: each `"key":value` after a comma, then `}`.
macro_rules! object_compound {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = Error;

            fn serialize_field<T: ?Sized + Serialize>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Error> {
                self.field(key, value)
            }

            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

object_compound!(SerializeStruct, SerializeStructVariant);

/// A map key: JSON keys are strings, so strings go as they are and numbers, booleans and
/// chars are quoted (as serde_json does); anything else is refused.
struct MapKey<'a>(&'a mut Vec<u8>);

impl MapKey<'_> {
    fn quoted(self, write: impl FnOnce(&mut Vec<u8>)) -> Result<(), Error> {
        self.0.push(b'"');
        write(self.0);
        self.0.push(b'"');
        Ok(())
    }
}

fn key_must_be_a_string() -> Error {
    Error("key must be a string".into())
}

impl ser::Serializer for MapKey<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = ser::Impossible<(), Error>;
    type SerializeTuple = ser::Impossible<(), Error>;
    type SerializeTupleStruct = ser::Impossible<(), Error>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = ser::Impossible<(), Error>;
    type SerializeStruct = ser::Impossible<(), Error>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.0, v);
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.0, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.quoted(|out| out.extend_from_slice(if v { b"true" as &[u8] } else { b"false" }))
    }

    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }

    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }

    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }

    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.quoted(|out| infallible(CompactFormatter.write_i64(out, v)))
    }

    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.quoted(|out| infallible(CompactFormatter.write_i128(out, v)))
    }

    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }

    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }

    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }

    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.quoted(|out| infallible(CompactFormatter.write_u64(out, v)))
    }

    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.quoted(|out| infallible(CompactFormatter.write_u128(out, v)))
    }

    fn serialize_f32(self, _v: f32) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_f64(self, _v: f64) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_none(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_some<T: ?Sized + Serialize>(self, _value: &T) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours<T: ?Sized + Serialize>(value: &T) -> String {
        let mut out = Vec::new();
        value.serialize(&mut Writer { out: &mut out }).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut strings: Vec<String> = vec![
            String::new(),
            "plain".into(),
            "exactly8".into(),
            "01a24f5f-d844-7748-9c22-f3145e4c3be8".into(),
            "quote \" and backslash \\ and / slash".into(),
            "\u{0}\u{1}\u{7}\u{8}\t\n\u{b}\u{c}\r\u{1b}\u{1f} \u{7f}".into(),
            "ünïcödé ✓ 𝄞 and \u{2028}\u{2029}".into(),
            "\"".repeat(17),
            format!("{}\n", "x".repeat(23)),
        ];
        // Every byte below 0x80 at every position of a 0..=17-byte string.
        for len in 0..=17usize {
            for at in 0..len {
                for byte in 0u8..0x80 {
                    let mut s = vec![b'a'; len];
                    s[at] = byte;
                    strings.push(String::from_utf8(s).unwrap());
                }
            }
        }
        // Mixed strings, with multi-byte characters between the bytes that need escaping.
        let alphabet: Vec<char> = "aZ9 \"\\/\n\t\u{0}\u{1f}\u{7f}é✓𝄞".chars().collect();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..20_000 {
            let mut s = String::new();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for i in 0..(x % 40) {
                let pick = (x >> (i % 48)) as usize ^ i as usize;
                s.push(alphabet[pick % alphabet.len()]);
            }
            strings.push(s);
        }
        for s in &strings {
            assert_eq!(ours(s), serde_json::to_string(s).unwrap(), "{s:?}");
            let key = std::collections::BTreeMap::from([(s.clone(), 1)]);
            assert_eq!(ours(&key), serde_json::to_string(&key).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn numbers_and_shapes_are_written_as_serde_json_writes_them() {
        #[derive(serde::Serialize)]
        enum Shape {
            Unit,
            Newtype(u8),
            Tuple(i32, bool),
            Struct { a: Option<u8>, b: () },
        }
        #[derive(serde::Serialize)]
        struct Everything {
            small: (i8, i16, i32, i64, i128),
            large: (u8, u16, u32, u64, u128),
            floats: Vec<f32>,
            flags: [bool; 2],
            letter: char,
            raw: serde_bytes_like::Bytes,
            nothing: Option<String>,
            something: Option<&'static str>,
            unit: (),
            shapes: Vec<Shape>,
            numbered: std::collections::BTreeMap<i64, &'static str>,
            flagged: std::collections::BTreeMap<bool, u8>,
            lettered: std::collections::BTreeMap<char, u8>,
            empty: (Vec<u8>, std::collections::BTreeMap<String, u8>),
        }
        mod serde_bytes_like {
            pub struct Bytes(pub Vec<u8>);
            impl serde::Serialize for Bytes {
                fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    s.serialize_bytes(&self.0)
                }
            }
        }
        let value = Everything {
            small: (i8::MIN, i16::MIN, i32::MIN, i64::MIN, i128::MIN),
            large: (u8::MAX, u16::MAX, u32::MAX, u64::MAX, u128::MAX),
            floats: vec![
                0.0,
                -0.0,
                1.5,
                f32::MAX,
                f32::MIN_POSITIVE,
                f32::NAN,
                f32::INFINITY,
            ],
            flags: [true, false],
            letter: '\n',
            raw: serde_bytes_like::Bytes(vec![0, 7, 255]),
            nothing: None,
            something: Some("x"),
            unit: (),
            shapes: vec![
                Shape::Unit,
                Shape::Newtype(3),
                Shape::Tuple(-1, true),
                Shape::Struct { a: None, b: () },
            ],
            numbered: [(-5, "a"), (7, "b")].into(),
            flagged: [(false, 1), (true, 2)].into(),
            lettered: [('"', 1)].into(),
            empty: (vec![], Default::default()),
        };
        assert_eq!(ours(&value), serde_json::to_string(&value).unwrap());
    }

    #[test]
    fn doubles_follow_the_protojson_number_rule() {
        let cases = [
            (0.0, "0"),
            (-0.0, "0"),
            (42.0, "42"),
            (-7.0, "-7"),
            (1.5, "1.5"),
            (MAX_EXACT_INTEGER, "9007199254740991"),
            (MAX_EXACT_INTEGER + 1.0, "9007199254740992.0"),
            (f64::NAN, "null"),
            (f64::NEG_INFINITY, "null"),
        ];
        for (value, written) in cases {
            assert_eq!(ours(&value), written, "{value}");
        }
        for value in [1e300, -2.5e-300, 0.1, 1.0 / 3.0, f64::MAX] {
            assert_eq!(ours(&value), serde_json::to_string(&value).unwrap());
        }
    }

    #[test]
    fn a_map_key_that_is_not_a_string_or_number_is_refused() {
        let map = std::collections::BTreeMap::from([((1, 2), 3)]);
        let mut out = Vec::new();
        let err = map.serialize(&mut Writer { out: &mut out }).unwrap_err();
        assert_eq!(err.to_string(), "key must be a string");
    }
}
