//! The shape of the columnsort matrix: N records as r rows by s columns,
//! stored column after column. Leighton's condition: s divides r and
//! r ≥ 2(s-1)².

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// r: records per column (one column is one buffer).
    pub rows: u64,
    /// s: columns.
    pub columns: u64,
}

impl Shape {
    pub fn records(&self) -> u64 {
        self.rows * self.columns
    }

    /// Checks Leighton's condition, explaining a violation.
    pub fn new(rows: u64, columns: u64) -> Result<Shape, String> {
        if rows == 0 || columns == 0 {
            return Err(format!("a {rows} x {columns} matrix holds no records"));
        }
        if !rows.is_multiple_of(columns) {
            return Err(format!("columnsort needs the column count s to divide the row count r; s = {columns} does not divide r = {rows}"));
        }
        let bound = 2 * (columns - 1) * (columns - 1);
        if rows < bound {
            return Err(format!("columnsort needs r >= 2(s-1)^2; r = {rows} rows, s = {columns} columns need r >= {bound}: use fewer, longer columns"));
        }
        Ok(Shape { rows, columns })
    }

    /// The shape for `records` with columns of `rows` records.
    pub fn with_rows(records: u64, rows: u64) -> Result<Shape, String> {
        if rows == 0 || !records.is_multiple_of(rows) {
            return Err(format!("{records} records do not fill whole columns of {rows} rows{}", suggestion(records)));
        }
        Shape::new(rows, records / rows).map_err(|e| format!("{e}{}", suggestion(records)))
    }

    /// The valid shape with the most columns (the least memory per buffer).
    pub fn smallest_columns(records: u64) -> Result<Shape, String> {
        valid_shapes(records)
            .last()
            .copied()
            .ok_or_else(|| format!("{records} records: no columnsort shape (the file is empty)"))
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rows x {} columns", self.rows, self.columns)
    }
}

/// Every valid shape for `records`, fewest columns first. Columns grow only
/// to about the cube root of 2N, so this looks at few candidates.
pub fn valid_shapes(records: u64) -> Vec<Shape> {
    let mut shapes = Vec::new();
    let mut columns = 1u64;
    while columns <= records && 2 * (columns - 1) * (columns - 1) * columns <= records {
        if records.is_multiple_of(columns) {
            if let Ok(shape) = Shape::new(records / columns, columns) {
                shapes.push(shape);
            }
        }
        columns += 1;
    }
    shapes
}

fn suggestion(records: u64) -> String {
    let rows: Vec<String> = valid_shapes(records).iter().rev().take(4).map(|s| s.rows.to_string()).collect();
    if rows.is_empty() {
        String::new()
    } else {
        format!(" (valid --rows for {records} records: {})", rows.join(", "))
    }
}
