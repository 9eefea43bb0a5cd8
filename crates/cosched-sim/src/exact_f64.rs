//! `f64` fields through serde without loss, for files that must give back
//! exactly the bits written (a study's shard documents, merged into the same
//! bytes as one run). Use as `#[serde(with = "cosched_sim::exact_f64")]`.
//!
//! Finite values are numbers: serde_json writes the shortest text that reads
//! back to the same bits, and reads them back exactly with its
//! `float_roundtrip` feature, which the workspace enables. JSON has no NaN or
//! infinities (serde_json would write null, losing them), so those are
//! strings: `"inf"`, `"-inf"`, `"NaN"` for Rust's `f64::NAN`, and
//! `"NaN:0x…"` with the bits for any other NaN (x86 computes 0/0 as a NaN
//! with the sign bit set).

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    if value.is_finite() {
        serializer.serialize_f64(*value)
    } else {
        serializer.serialize_str(&non_finite_text(*value))
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    deserializer.deserialize_any(ExactF64Visitor)
}

/// An `f64` that serializes as this module does, for values inside
/// containers (`Vec<ExactF64>`, `Option<…>`), where `with` cannot reach.
#[derive(Copy, Clone, Debug)]
pub struct ExactF64(pub f64);

impl Serialize for ExactF64 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize(&self.0, serializer)
    }
}

impl<'de> Deserialize<'de> for ExactF64 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ExactF64, D::Error> {
        deserialize(deserializer).map(ExactF64)
    }
}

/// `Option<Vec<f64>>` fields, each value as this module writes it.
pub mod option_list {
    use super::ExactF64;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(values: &Option<Vec<f64>>, serializer: S) -> Result<S::Ok, S::Error> {
        let exact: Option<Vec<ExactF64>> = values.as_ref().map(|v| v.iter().copied().map(ExactF64).collect());
        exact.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<f64>>, D::Error> {
        let exact = Option::<Vec<ExactF64>>::deserialize(deserializer)?;
        Ok(exact.map(|v| v.into_iter().map(|x| x.0).collect()))
    }
}

fn non_finite_text(value: f64) -> String {
    if value == f64::INFINITY {
        "inf".into()
    } else if value == f64::NEG_INFINITY {
        "-inf".into()
    } else if value.to_bits() == f64::NAN.to_bits() {
        "NaN".into()
    } else {
        format!("NaN:{:#018x}", value.to_bits())
    }
}

/// The value of a string written by [`non_finite_text`]; `None` for any other text.
fn parse_non_finite(text: &str) -> Option<f64> {
    match text {
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => {
            let bits = u64::from_str_radix(text.strip_prefix("NaN:0x")?, 16).ok()?;
            Some(f64::from_bits(bits)).filter(|v| v.is_nan())
        }
    }
}

struct ExactF64Visitor;

impl Visitor<'_> for ExactF64Visitor {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number, or \"inf\", \"-inf\", \"NaN\" or \"NaN:0x\" and 16 hex digits")
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<f64, E> {
        Ok(value)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<f64, E> {
        Ok(value as f64)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<f64, E> {
        Ok(value as f64)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<f64, E> {
        parse_non_finite(text).ok_or_else(|| E::invalid_value(de::Unexpected::Str(text), &self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Holder {
        #[serde(with = "super")]
        value: f64,
    }

    fn round_trip(value: f64) -> f64 {
        let text = serde_json::to_string(&Holder { value }).unwrap();
        serde_json::from_str::<Holder>(&text).unwrap_or_else(|e| panic!("{text}: {e}")).value
    }

    /// Spread over every exponent and sign: a fixed xorshift of the bits.
    fn many_bit_patterns() -> impl Iterator<Item = u64> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        std::iter::repeat_with(move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        })
        .take(200_000)
    }

    #[test]
    fn every_value_comes_back_with_its_bits() {
        let special = [
            0.0,
            -0.0,
            f64::MIN_POSITIVE,
            f64::MIN_POSITIVE / 3.0,
            f64::from_bits(1),
            f64::MAX,
            f64::MIN,
            f64::EPSILON,
            0.1,
            1.0 / 3.0,
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7ff0_0000_0000_0001),
        ];
        for value in special.into_iter().chain(many_bit_patterns().map(f64::from_bits)) {
            assert_eq!(round_trip(value).to_bits(), value.to_bits(), "{value:e} ({:#x})", value.to_bits());
        }
    }

    #[test]
    fn strings_other_than_the_non_finite_names_are_refused() {
        for text in [r#""nan""#, r#""NaN:0x0000000000000001""#, r#""NaN:0xzz""#, r#""1.5""#, "null", "true"] {
            let json = format!(r#"{{"value": {text}}}"#);
            assert!(serde_json::from_str::<Holder>(&json).is_err(), "{json} accepted");
        }
        assert_eq!(serde_json::from_str::<Holder>(r#"{"value": 2}"#).unwrap().value, 2.0);
    }
}
