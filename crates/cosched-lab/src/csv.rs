//! CSV written from one table per record type: each column pairs its header
//! with the accessor of the field it names, so the two cannot drift apart.

/// One column of a CSV file of `R` records: its header, what its values are, and how a record fills it.
pub struct Column<R: ?Sized> {
    pub header: &'static str,
    pub kind: Kind,
    pub value: fn(&R) -> String,
}

/// What a column holds, whatever the values of one file: readers (the Python package's DataFrames) type the
/// column by it instead of guessing from the values. Empty means missing in every kind but text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An integer.
    Int,
    /// A number (`num`: an empty field is a non-finite one).
    Float,
    Text,
    /// `true` or `false`.
    Flag,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Text => "text",
            Kind::Flag => "flag",
        }
    }

    /// Does `field` (as the file holds it, unquoted) read as this kind?
    pub fn admits(self, field: &str) -> bool {
        match self {
            Kind::Int => field.is_empty() || field.parse::<i64>().is_ok() || field.parse::<u64>().is_ok(),
            Kind::Float => field.is_empty() || field.parse::<f64>().is_ok(),
            Kind::Text => true,
            Kind::Flag => matches!(field, "true" | "false"),
        }
    }
}

/// An integer column.
pub const fn int<R: ?Sized>(header: &'static str, value: fn(&R) -> String) -> Column<R> {
    Column { header, kind: Kind::Int, value }
}

/// A number column (its values written by `num`).
pub const fn float<R: ?Sized>(header: &'static str, value: fn(&R) -> String) -> Column<R> {
    Column { header, kind: Kind::Float, value }
}

/// A text column (its values written by `csv_field` where they could hold a comma).
pub const fn text<R: ?Sized>(header: &'static str, value: fn(&R) -> String) -> Column<R> {
    Column { header, kind: Kind::Text, value }
}

/// A `true`/`false` column.
pub const fn flag<R: ?Sized>(header: &'static str, value: fn(&R) -> String) -> Column<R> {
    Column { header, kind: Kind::Flag, value }
}

/// Each column's header and kind name, in order: what a reader needs to type the file's columns.
pub type ColumnKinds = Vec<(String, String)>;

/// The `ColumnKinds` of a table.
pub fn kinds<R: ?Sized>(columns: &[Column<R>]) -> ColumnKinds {
    columns.iter().map(|c| (c.header.to_string(), c.kind.name().to_string())).collect()
}

/// The header line and one line per record.
pub fn to_csv<'r, R: ?Sized + 'r>(columns: &[Column<R>], records: impl IntoIterator<Item = &'r R>) -> String {
    let headers: Vec<String> = columns.iter().map(|c| c.header.to_string()).collect();
    let mut text = String::new();
    push_row(&mut text, &headers);
    for record in records {
        let fields: Vec<String> = columns.iter().map(|c| (c.value)(record)).collect();
        // Every test that writes a table checks the kinds readers type its columns by.
        debug_assert!(
            columns.iter().zip(&fields).all(|(c, field)| c.kind.admits(field)),
            "a field does not fit its column's kind: {:?}",
            columns.iter().zip(&fields).find(|(c, field)| !c.kind.admits(field)).map(|(c, f)| (c.header, c.kind, f))
        );
        push_row(&mut text, &fields);
    }
    text
}

/// A CSV field: quoted only when it must be.
pub fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// Fixed formatting for floats in CSV, so output bytes do not depend on
/// anything but the values.
pub fn num(value: f64) -> String {
    if value.is_finite() {
        format!("{value:.9}").trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        String::new()
    }
}

/// Append one CSV row.
pub fn push_row(text: &mut String, fields: &[String]) {
    text.push_str(&fields.join(","));
    text.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_fields_come_from_one_table() {
        let columns = [text("name", |r: &(String, f64)| csv_field(&r.0)), float("value", |r| num(r.1))];
        let rows = [("a,b".to_string(), 1.5), ("c".to_string(), f64::NAN)];
        assert_eq!(to_csv(&columns, &rows), "name,value\n\"a,b\",1.5\nc,\n");
        assert_eq!(kinds(&columns), [("name".into(), "text".into()), ("value".into(), "float".into())]);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "does not fit its column's kind")]
    fn a_field_that_does_not_fit_its_declared_kind_stops_a_test_build() {
        let columns = [int("count", |r: &f64| num(*r))];
        to_csv(&columns, &[1.5]);
    }

    #[test]
    fn kinds_admit_what_their_writers_write() {
        assert!(Kind::Int.admits("-3") && Kind::Int.admits(&u64::MAX.to_string()) && !Kind::Int.admits("1.5"));
        assert!(Kind::Float.admits("") && Kind::Float.admits("0.123456789") && !Kind::Float.admits("x"));
        assert!(Kind::Flag.admits("false") && !Kind::Flag.admits("") && !Kind::Flag.admits("1"));
    }

    #[test]
    fn numbers_have_fixed_precision_without_trailing_zeros() {
        assert_eq!(num(2.0), "2");
        assert_eq!(num(0.1234567891), "0.123456789");
        assert_eq!(num(f64::INFINITY), "");
    }
}
