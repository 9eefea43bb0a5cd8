//! CSV written from one table per record type: each column pairs its header
//! with the accessor of the field it names, so the two cannot drift apart.

/// One column of a CSV file of `R` records: its header and how a record fills it.
pub struct Column<R: ?Sized> {
    pub header: &'static str,
    pub value: fn(&R) -> String,
}

/// Shorthand for a column table entry.
pub const fn column<R: ?Sized>(header: &'static str, value: fn(&R) -> String) -> Column<R> {
    Column { header, value }
}

/// The header line and one line per record.
pub fn to_csv<'r, R: ?Sized + 'r>(columns: &[Column<R>], records: impl IntoIterator<Item = &'r R>) -> String {
    let headers: Vec<String> = columns.iter().map(|c| c.header.to_string()).collect();
    let mut text = String::new();
    push_row(&mut text, &headers);
    for record in records {
        let fields: Vec<String> = columns.iter().map(|c| (c.value)(record)).collect();
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
        let columns = [column("name", |r: &(String, f64)| csv_field(&r.0)), column("value", |r| num(r.1))];
        let rows = [("a,b".to_string(), 1.5), ("c".to_string(), f64::NAN)];
        assert_eq!(to_csv(&columns, &rows), "name,value\n\"a,b\",1.5\nc,\n");
    }

    #[test]
    fn numbers_have_fixed_precision_without_trailing_zeros() {
        assert_eq!(num(2.0), "2");
        assert_eq!(num(0.1234567891), "0.123456789");
        assert_eq!(num(f64::INFINITY), "");
    }
}
