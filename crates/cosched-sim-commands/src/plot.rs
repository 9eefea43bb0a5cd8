//! Small, dependency-free SVG charts for result folders: what people would
//! rather look at than read. Output is plain text with fixed number
//! formatting, so the same results give the same bytes.
//!
//! Conventions every chart keeps: a scheme has one colour and one marker in
//! every figure ([`scheme_style`]); axis ticks are 1, 2 or 5 times a power of
//! ten; whatever a mark means is said in the legend; the canvas grows to fit
//! its longest title and label instead of cutting them off.

use cosched_sim::Scheme;
use std::fmt::Write;

/// How one series or category is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Style {
    pub colour: &'static str,
    pub marker: Marker,
    pub dash: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Marker {
    Circle,
    Square,
    Diamond,
    TriangleUp,
    TriangleDown,
    HollowCircle,
    HollowSquare,
    HollowDiamond,
    HollowTriangleUp,
    HollowTriangleDown,
    Cross,
}

/// Paul Tol's colour-blind-safe "muted" scheme, black, and Okabe-Ito's vermillion: one per scheme.
const SCHEME_COLOURS: [&str; 11] = [
    "#000000", "#332288", "#117733", "#999933", "#CC6677", "#882255", "#44AA99", "#DDAA33", "#AA4499", "#6699CC",
    "#D55E00",
];
const SCHEME_MARKERS: [Marker; 11] = [
    Marker::Circle,
    Marker::Square,
    Marker::Diamond,
    Marker::TriangleUp,
    Marker::TriangleDown,
    Marker::HollowCircle,
    Marker::HollowSquare,
    Marker::HollowDiamond,
    Marker::HollowTriangleUp,
    Marker::HollowTriangleDown,
    Marker::Cross,
];

/// The style of a scheme, the same in every figure; other names get one by
/// their position among the names of their figure.
pub fn scheme_style(name: &str, position: usize) -> Style {
    // A scheme's place in the scheme table fixes its style.
    let i = Scheme::all_names().iter().position(|s| *s == name).unwrap_or(position);
    indexed_style(i)
}

pub fn indexed_style(i: usize) -> Style {
    const DASHES: [&str; 2] = ["", "6,3"];
    Style {
        colour: SCHEME_COLOURS[i % SCHEME_COLOURS.len()],
        marker: SCHEME_MARKERS[i % SCHEME_MARKERS.len()],
        dash: DASHES[i / SCHEME_COLOURS.len() % DASHES.len()],
    }
}

/// Colours of categories that are not schemes (bar segments, variants): Okabe-Ito.
const SEGMENT_COLOURS: [&str; 6] = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#999999", "#D55E00"];

/// Approximate width of text in the charts' font (DejaVu Sans), px.
fn text_width(text: &str, font_px: f64) -> f64 {
    text.chars().count() as f64 * font_px * 0.62
}

/// A marker centred at (x, y), with a tooltip.
fn marker_svg(marker: Marker, colour: &str, x: f64, y: f64, title: &str) -> String {
    let r = 4.0;
    let (fill, stroke_width) = match marker {
        Marker::Circle | Marker::Square | Marker::Diamond | Marker::TriangleUp | Marker::TriangleDown => (colour, 1.0),
        Marker::Cross => ("none", 2.0),
        _ => ("white", 1.5),
    };
    let shape = match marker {
        Marker::Circle | Marker::HollowCircle => format!(r#"<circle cx="{x:.1}" cy="{y:.1}" r="{r}""#),
        Marker::Square | Marker::HollowSquare => {
            format!(r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}""#, x - r, y - r, 2.0 * r, 2.0 * r)
        }
        Marker::Diamond | Marker::HollowDiamond => format!(
            r#"<path d="M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} Z""#,
            y - 1.3 * r,
            x + 1.3 * r,
            y + 1.3 * r,
            x - 1.3 * r
        ),
        Marker::TriangleUp | Marker::HollowTriangleUp => format!(
            r#"<path d="M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z""#,
            y - 1.2 * r,
            x + 1.2 * r,
            y + r,
            x - 1.2 * r,
            y + r
        ),
        Marker::TriangleDown | Marker::HollowTriangleDown => format!(
            r#"<path d="M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z""#,
            y + 1.2 * r,
            x + 1.2 * r,
            y - r,
            x - 1.2 * r,
            y - r
        ),
        Marker::Cross => format!(
            r#"<path d="M{:.1},{:.1} L{:.1},{:.1} M{:.1},{:.1} L{:.1},{:.1}""#,
            x - r,
            y - r,
            x + r,
            y + r,
            x - r,
            y + r,
            x + r,
            y - r
        ),
    };
    format!(
        r#"{shape} fill="{fill}" stroke="{colour}" stroke-width="{stroke_width}"><title>{}</title></{}>"#,
        escape(title),
        match marker {
            Marker::Circle | Marker::HollowCircle => "circle",
            Marker::Square | Marker::HollowSquare => "rect",
            _ => "path",
        }
    )
}

/// The opening of a chart: the root element, a white background, the title.
fn svg_start(width: f64, height: f64, title: &str, title_x: f64, title_y: f64) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="DejaVu Sans, sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{title_x}" y="{title_y}" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    );
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A "nice" axis maximum: 1, 2 or 5 times a power of ten, at least `value`.
fn nice_max(value: f64) -> f64 {
    if !(value.is_finite() && value > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|&v| v >= value).unwrap_or(10.0 * power)
}

/// Ticks for a linear axis covering [low, high]: a step of 1, 2 or 5 times a
/// power of ten giving 4 to 10 intervals, and the range widened to whole steps.
pub fn nice_ticks(low: f64, high: f64) -> Vec<f64> {
    let span = if high > low { high - low } else { 1.0 };
    let step = nice_max(span / 8.0);
    let start = (low / step + 1e-9).floor() * step;
    let end = (high / step - 1e-9).ceil() * step;
    let count = ((end - start) / step).round() as usize;
    (0..=count.max(1)).map(|k| start + step * k as f64).map(|v| if v.abs() < step * 1e-9 { 0.0 } else { v }).collect()
}

/// Ticks for a log axis: decades, with 2 and 5 between them when the axis
/// spans at most two and a half decades.
fn log_ticks(low: f64, high: f64) -> Vec<f64> {
    let (d0, d1) = (low.log10().floor() as i32, high.log10().ceil() as i32);
    // Within a decade 1, 2, 5 would leave a range such as 0.8 to 4.5 with two labels: every step of a unit then.
    let decades = (high / low).log10();
    let multiples: &[f64] = match decades {
        d if d <= 1.0 => &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
        d if d <= 2.5 => &[1.0, 2.0, 5.0],
        _ => &[1.0],
    };
    let mut ticks = Vec::new();
    for decade in d0..=d1 {
        for m in multiples {
            let v = m * 10f64.powi(decade);
            if v >= low * (1.0 - 1e-9) && v <= high * (1.0 + 1e-9) {
                ticks.push(v);
            }
        }
    }
    ticks
}

/// Tick labels: no trailing zeros; three decimals, or as many as a small value needs.
fn format_tick(v: f64) -> String {
    let decimals = if v != 0.0 && v.abs() < 0.01 { (-v.abs().log10()).ceil() as usize + 1 } else { 3 };
    let text = format!("{v:.decimals$}");
    let text = text.trim_end_matches('0').trim_end_matches('.').to_string();
    if text == "-0" {
        "0".into()
    } else {
        text
    }
}

/// Values shown beside marks: three significant digits.
fn format_value(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A chart of any kind, kept as data until it is drawn, so that whoever holds it can still mark it (a partial
/// study's figures say so in their title).
pub enum Chart {
    Line(LineChart),
    GroupedBars(GroupedBarChart),
    StackedBars(StackedBarChart),
}

impl Chart {
    pub fn to_svg(&self) -> String {
        match self {
            Chart::Line(chart) => chart.to_svg(),
            Chart::GroupedBars(chart) => chart.to_svg(),
            Chart::StackedBars(chart) => chart.to_svg(),
        }
    }

    pub fn title_mut(&mut self) -> &mut String {
        match self {
            Chart::Line(chart) => &mut chart.title,
            Chart::GroupedBars(chart) => &mut chart.title,
            Chart::StackedBars(chart) => &mut chart.title,
        }
    }
}

impl From<LineChart> for Chart {
    fn from(chart: LineChart) -> Self {
        Chart::Line(chart)
    }
}

impl From<GroupedBarChart> for Chart {
    fn from(chart: GroupedBarChart) -> Self {
        Chart::GroupedBars(chart)
    }
}

impl From<StackedBarChart> for Chart {
    fn from(chart: StackedBarChart) -> Self {
        Chart::StackedBars(chart)
    }
}

/// One bar made of stacked segments (values in the chart's unit), with a
/// whisker across its total: a confidence interval, or a range of answers.
pub struct StackedBar {
    pub label: String,
    pub segments: Vec<f64>,
    /// How far the whisker reaches below and above the bar's end (a 95 % interval's half-width both ways, or
    /// a range of answers); none at (0, 0).
    pub whisker: (f64, f64),
}

pub struct StackedBarChart {
    pub title: String,
    pub unit: String,
    pub segment_names: Vec<String>,
    pub bars: Vec<StackedBar>,
    /// Lines under the legend saying what any other mark means (one per line of the text).
    pub note: Option<String>,
}

const BAR_H: f64 = 26.0;
const GAP: f64 = 12.0;
const TOP: f64 = 48.0;

/// Horizontal axis of a bar chart: the line, nice ticks and the unit, at `axis_y`.
fn bar_axis(svg: &mut String, left: f64, plot_w: f64, axis_y: f64, max: f64, unit: &str) {
    let x = |v: f64| left + plot_w * (v / max).clamp(0.0, 1.0);
    let _ =
        writeln!(svg, r##"<line x1="{left:.1}" y1="{axis_y:.1}" x2="{:.1}" y2="{axis_y:.1}" stroke="#333"/>"##, x(max));
    for v in nice_ticks(0.0, max) {
        let _ = writeln!(
            svg,
            r##"<line x1="{0:.1}" y1="{axis_y:.1}" x2="{0:.1}" y2="{1:.1}" stroke="#333"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle" fill="#333">{3}</text>"##,
            x(v),
            axis_y + 4.0,
            axis_y + 17.0,
            format_tick(v)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        left + plot_w / 2.0,
        axis_y + 34.0,
        escape(unit)
    );
}

/// A whisker across a bar's end (a confidence interval, or a range of answers).
fn whisker(svg: &mut String, x_low: f64, x_high: f64, y_mid: f64) {
    let _ = writeln!(
        svg,
        r##"<path d="M{x_low:.1},{0:.1} V{1:.1} M{x_low:.1},{y_mid:.1} H{x_high:.1} M{x_high:.1},{0:.1} V{1:.1}" stroke="#222" stroke-width="1.2" fill="none"/>"##,
        y_mid - 5.0,
        y_mid + 5.0
    );
}

/// Under a bar chart's axis: a legend of the coloured names, the note, the end.
fn bar_footer(svg: &mut String, left: f64, axis_y: f64, names: &[String], note: Option<&str>) {
    let entries: Vec<(String, &str)> =
        names.iter().enumerate().map(|(k, n)| (n.clone(), SEGMENT_COLOURS[k % SEGMENT_COLOURS.len()])).collect();
    legend_row(svg, left, axis_y + 58.0, &entries);
    for (i, line) in note_lines(note).enumerate() {
        let y = axis_y + 76.0 + NOTE_LINE_H * i as f64;
        let _ = writeln!(svg, r##"<text x="{left:.1}" y="{y:.1}" fill="#333">{}</text>"##, escape(line));
    }
    svg.push_str("</svg>\n");
}

/// A chart note's lines, each drawn under the one before.
const NOTE_LINE_H: f64 = 18.0;

fn note_lines(note: Option<&str>) -> impl Iterator<Item = &str> {
    note.into_iter().flat_map(str::lines)
}

/// Width of a legend row of these names (see `legend_row`).
fn legend_width(names: &[String]) -> f64 {
    names.iter().map(|n| 30.0 + text_width(n, 12.0)).sum()
}

/// Legend entries in a row from `x` at `y`: a swatch and a name each.
fn legend_row(svg: &mut String, mut x: f64, y: f64, entries: &[(String, &str)]) {
    for (name, colour) in entries {
        let _ = writeln!(
            svg,
            r#"<rect x="{x:.1}" y="{:.1}" width="12" height="12" fill="{colour}"/><text x="{:.1}" y="{y:.1}">{}</text>"#,
            y - 10.0,
            x + 16.0,
            escape(name)
        );
        x += 30.0 + text_width(name, 12.0);
    }
}

impl StackedBarChart {
    /// Render as horizontal stacked bars with an axis and a legend.
    pub fn to_svg(&self) -> String {
        let label_w = self.bars.iter().map(|b| text_width(&b.label, 12.0)).fold(60.0, f64::max) + 16.0;
        let width = (label_w + 630.0)
            .max(text_width(&self.title, 15.0) + 20.0)
            .max(label_w + legend_width(&self.segment_names) + 10.0)
            .max(label_w + note_lines(self.note.as_deref()).map(|l| text_width(l, 12.0)).fold(0.0, f64::max) + 10.0);
        let plot_w = width - label_w - 70.0;
        let note_h = NOTE_LINE_H * note_lines(self.note.as_deref()).count() as f64;
        let height = TOP + self.bars.len() as f64 * (BAR_H + GAP) + 78.0 + note_h;
        let total = |b: &StackedBar| b.segments.iter().filter(|v| v.is_finite()).sum::<f64>();
        let max = nice_max(self.bars.iter().map(|b| total(b) + b.whisker.1).fold(0.0, f64::max));
        let x = |v: f64| label_w + plot_w * (v / max).clamp(0.0, 1.0);
        let mut svg = svg_start(width, height, &self.title, 10.0, 22.0);
        for (i, bar) in self.bars.iter().enumerate() {
            let y = TOP + i as f64 * (BAR_H + GAP);
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                label_w - 8.0,
                y + BAR_H * 0.68,
                escape(&bar.label)
            );
            let mut start = 0.0;
            for (k, &v) in bar.segments.iter().enumerate() {
                if !(v.is_finite() && v > 0.0) {
                    continue;
                }
                let (x0, x1) = (x(start), x(start + v));
                let _ = writeln!(
                    svg,
                    r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{BAR_H}" fill="{}"><title>{}: {}</title></rect>"#,
                    (x1 - x0).max(0.0),
                    SEGMENT_COLOURS[k % SEGMENT_COLOURS.len()],
                    escape(&self.segment_names[k]),
                    format_value(v)
                );
                start += v;
            }
            let (below, above) = bar.whisker;
            if below > 0.0 || above > 0.0 {
                whisker(&mut svg, x(start - below), x(start + above), y + BAR_H / 2.0);
            }
            let _ = writeln!(
                svg,
                r##"<text x="{:.1}" y="{:.1}" fill="#333">{}</text>"##,
                x(start + above) + 4.0,
                y + BAR_H * 0.68,
                format_value(start)
            );
        }
        let axis_y = TOP + self.bars.len() as f64 * (BAR_H + GAP);
        bar_axis(&mut svg, label_w, plot_w, axis_y, max, &self.unit);
        bar_footer(&mut svg, label_w, axis_y, &self.segment_names, self.note.as_deref());
        svg
    }
}

/// Bars grouped by category (a scheme), one per series (a variant), each with
/// a confidence interval; an optional reference line (1 for ratios).
pub struct GroupedBarChart {
    pub title: String,
    pub unit: String,
    pub categories: Vec<String>,
    pub series_names: Vec<String>,
    /// `values[category][series]`: (mean, CI half-width); NaN: not run.
    pub values: Vec<Vec<(f64, f64)>>,
    pub reference: Option<f64>,
    pub note: Option<String>,
}

impl GroupedBarChart {
    pub fn to_svg(&self) -> String {
        let series = self.series_names.len().max(1) as f64;
        let (bar_h, group_gap) = (16.0, 14.0);
        let group_h = series * bar_h + group_gap;
        let label_w = self.categories.iter().map(|c| text_width(c, 12.0)).fold(60.0, f64::max) + 16.0;
        let width = (label_w + 630.0)
            .max(text_width(&self.title, 15.0) + 20.0)
            .max(label_w + legend_width(&self.series_names) + 10.0);
        let plot_w = width - label_w - 70.0;
        let note_h = if self.note.is_some() { 18.0 } else { 0.0 };
        let height = TOP + self.categories.len() as f64 * group_h + 78.0 + note_h;
        let top_value = self.values.iter().flatten().filter(|(m, _)| m.is_finite()).map(|(m, e)| m + e);
        let max = nice_max(top_value.fold(self.reference.unwrap_or(0.0), f64::max));
        let x = |v: f64| label_w + plot_w * (v / max).clamp(0.0, 1.0);
        let mut svg = svg_start(width, height, &self.title, 10.0, 22.0);
        for (c, category) in self.categories.iter().enumerate() {
            let y0 = TOP + c as f64 * group_h;
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                label_w - 8.0,
                y0 + series * bar_h / 2.0 + 4.0,
                escape(category)
            );
            for (s, &(mean, error)) in self.values[c].iter().enumerate() {
                let y = y0 + s as f64 * bar_h;
                let colour = SEGMENT_COLOURS[s % SEGMENT_COLOURS.len()];
                if !mean.is_finite() {
                    let _ = writeln!(
                        svg,
                        r##"<text x="{:.1}" y="{:.1}" fill="#333">not run</text>"##,
                        label_w + 4.0,
                        y + 12.0
                    );
                    continue;
                }
                let _ = writeln!(
                    svg,
                    r#"<rect x="{label_w:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{colour}"><title>{} {}: {}</title></rect>"#,
                    x(mean) - label_w,
                    bar_h - 2.0,
                    escape(category),
                    escape(&self.series_names[s]),
                    format_value(mean)
                );
                if error > 0.0 {
                    whisker(&mut svg, x(mean - error), x(mean + error), y + bar_h / 2.0 - 1.0);
                }
                let _ = writeln!(
                    svg,
                    r##"<text x="{:.1}" y="{:.1}" fill="#333" font-size="11">{}</text>"##,
                    x(mean + error) + 4.0,
                    y + 11.0,
                    format_value(mean)
                );
            }
        }
        let axis_y = TOP + self.categories.len() as f64 * group_h;
        if let Some(r) = self.reference {
            let _ = writeln!(
                svg,
                r##"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{axis_y:.1}" stroke="#222" stroke-dasharray="4,3"/>"##,
                x(r),
                TOP - 6.0
            );
        }
        bar_axis(&mut svg, label_w, plot_w, axis_y, max, &self.unit);
        bar_footer(&mut svg, label_w, axis_y, &self.series_names, self.note.as_deref());
        svg
    }
}

/// One line of a line chart. Points from `clipped_from` on left the chart
/// (saturated runs): the first is drawn at the top edge as an arrow, the
/// rest not at all.
pub struct Series {
    pub name: String,
    pub style: Style,
    pub points: Vec<(f64, f64)>,
    pub clipped_from: Option<usize>,
    /// Error bar half-heights and half-widths, one per point (empty: none
    /// drawn). Linear axes only: on a log axis, give `y_intervals`.
    pub y_errors: Vec<f64>,
    pub x_errors: Vec<f64>,
    /// Error bars as (low, high), one per point (empty: none drawn): an
    /// interval computed on the log scale stays positive on a log axis.
    pub y_intervals: Vec<(f64, f64)>,
}

/// A line chart, with a logarithmic or linear y axis.
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_range: (f64, f64),
    pub y_range: (f64, f64),
    pub log_y: bool,
    pub series: Vec<Series>,
    /// Lines under the legend saying what other marks mean.
    pub legend_notes: Vec<String>,
    /// At most this many markers per series, evenly spaced, the line carrying the points between (`None`: a
    /// marker at every point): a series of hundreds of points reads as a line, not a band of markers.
    pub max_markers: Option<usize>,
}

impl LineChart {
    /// The y value as drawn: its logarithm on a log axis.
    fn scale_y(&self, y: f64) -> f64 {
        if self.log_y {
            y.max(1e-12).log10()
        } else {
            y
        }
    }

    fn x_ticks(&self) -> Vec<f64> {
        nice_ticks(self.x_range.0, self.x_range.1)
    }

    fn y_ticks(&self) -> Vec<f64> {
        if self.log_y {
            log_ticks(self.y_range.0, self.y_range.1)
        } else {
            nice_ticks(self.y_range.0, self.y_range.1)
        }
    }

    pub fn to_svg(&self) -> String {
        let legend_w = self
            .series
            .iter()
            .map(|s| text_width(&s.name, 12.0) + 50.0)
            .chain(self.legend_notes.iter().map(|n| text_width(n, 11.0) + 20.0))
            .fold(120.0, f64::max);
        let (left, top, bottom) = (74.0, 40.0, 50.0);
        let plot_w = 540.0;
        let w = (left + plot_w + legend_w + 10.0).max(text_width(&self.title, 15.0) + 20.0);
        let h = 480.0f64.max(top + 20.0 + 18.0 * (self.series.len() + self.legend_notes.len()) as f64 + bottom);
        let ph = h - top - bottom;
        // Nice ticks widen the range to whole steps.
        let (xt, yt) = (self.x_ticks(), self.y_ticks());
        let (x0, x1) = (xt[0].min(self.x_range.0), xt[xt.len() - 1].max(self.x_range.1));
        let (y0, y1) = if self.log_y {
            (self.scale_y(self.y_range.0), self.scale_y(self.y_range.1))
        } else {
            (yt[0].min(self.y_range.0), yt[yt.len() - 1].max(self.y_range.1))
        };
        let px = |x: f64| left + plot_w * (x - x0) / (x1 - x0);
        let py = |y: f64| top + ph * (1.0 - (self.scale_y(y) - y0) / (y1 - y0)).clamp(0.0, 1.0);
        let mut svg = svg_start(w, h, &self.title, 10.0, 24.0);
        for v in yt {
            let y = py(v);
            let _ = writeln!(
                svg,
                r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{}</text>"##,
                left + plot_w,
                left - 6.0,
                y + 4.0,
                format_tick(v)
            );
        }
        for v in xt {
            let x = px(v);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#333">{}</text>"##,
                top + ph,
                top + ph + 16.0,
                format_tick(v)
            );
        }
        let _ =
            writeln!(svg, r##"<rect x="{left}" y="{top}" width="{plot_w}" height="{ph}" fill="none" stroke="#333"/>"##);
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            left + plot_w / 2.0,
            h - 12.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            svg,
            r#"<text x="16" y="{0:.1}" text-anchor="middle" transform="rotate(-90 16 {0:.1})">{1}</text>"#,
            top + ph / 2.0,
            escape(&self.y_label)
        );
        for series in &self.series {
            self.draw_series(&mut svg, series, &px, &py, top);
        }
        let legend_x = left + plot_w + 12.0;
        for (i, series) in self.series.iter().enumerate() {
            let ly = top + 14.0 + 18.0 * i as f64;
            let Style { colour, marker, dash } = series.style;
            let _ = writeln!(
                svg,
                r#"<line x1="{legend_x:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>{}<text x="{:.1}" y="{:.1}">{}</text>"#,
                legend_x + 30.0,
                marker_svg(marker, colour, legend_x + 15.0, ly, &series.name),
                legend_x + 38.0,
                ly + 4.0,
                escape(&series.name)
            );
        }
        for (k, note) in self.legend_notes.iter().enumerate() {
            let ly = top + 24.0 + 18.0 * (self.series.len() + k) as f64;
            let _ = writeln!(
                svg,
                r##"<text x="{legend_x:.1}" y="{ly:.1}" font-size="11" fill="#333">{}</text>"##,
                escape(note)
            );
        }
        svg.push_str("</svg>\n");
        svg
    }

    fn draw_series(
        &self,
        svg: &mut String,
        series: &Series,
        px: &dyn Fn(f64) -> f64,
        py: &dyn Fn(f64) -> f64,
        top: f64,
    ) {
        let Style { colour, marker, dash } = series.style;
        let shown = series.clipped_from.map_or(series.points.len(), |c| (c + 1).min(series.points.len()));
        let is_clipped = |k: usize| series.clipped_from.is_some_and(|c| k >= c);
        let path: Vec<String> = series.points[..shown]
            .iter()
            .enumerate()
            .map(|(k, &(x, y))| format!("{:.1},{:.1}", px(x), if is_clipped(k) { top } else { py(y) }))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.8" stroke-dasharray="{dash}"/>"#,
            path.join(" ")
        );
        debug_assert!(!self.log_y || series.y_errors.is_empty(), "symmetric errors on a log axis");
        let marker_step = self.max_markers.map_or(1, |most| shown.div_ceil(most.max(1)).max(1));
        for (k, &(x, y)) in series.points[..shown].iter().enumerate().filter(|(k, _)| !is_clipped(*k)) {
            let interval = series.y_intervals.get(k).copied().filter(|(low, high)| high > low);
            let interval = interval.or_else(|| series.y_errors.get(k).filter(|e| **e > 0.0).map(|&e| (y - e, y + e)));
            if let Some((low, high)) = interval {
                let _ = writeln!(
                    svg,
                    r#"<path d="M{0:.1},{1:.1} V{2:.1} M{3:.1},{1:.1} H{4:.1} M{3:.1},{2:.1} H{4:.1}" stroke="{colour}" stroke-width="1.2" fill="none"/>"#,
                    px(x),
                    py(low),
                    py(high),
                    px(x) - 3.0,
                    px(x) + 3.0
                );
            }
            if let Some(&e) = series.x_errors.get(k).filter(|e| **e > 0.0) {
                let _ = writeln!(
                    svg,
                    r#"<path d="M{0:.1},{1:.1} H{2:.1}" stroke="{colour}" stroke-width="1.2" fill="none"/>"#,
                    px(x - e),
                    py(y),
                    px(x + e)
                );
            }
            if k % marker_step != 0 {
                continue;
            }
            let _ = writeln!(
                svg,
                "{}",
                marker_svg(
                    marker,
                    colour,
                    px(x),
                    py(y),
                    &format!("{}: {} at {}", series.name, format_value(y), format_value(x))
                )
            );
        }
        if let Some(c) = series.clipped_from.filter(|&c| c < series.points.len()) {
            let cx = px(series.points[c].0);
            let _ = writeln!(
                svg,
                r#"<path d="M{:.1},{:.1} L{:.1},{:.1} L{cx:.1},{top:.1} Z" fill="{colour}"><title>{}: saturated</title></path>"#,
                cx - 6.0,
                top + 10.0,
                cx + 6.0,
                top + 10.0,
                escape(&series.name)
            );
        }
    }
}

/// Render an SVG to PNG, with the machine's fonts (DejaVu, installed by
/// `scripts/setup`). Deterministic for the same SVG and fonts.
pub fn svg_to_png(svg: &str) -> Result<Vec<u8>, String> {
    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(svg, &options).map_err(|e| format!("chart SVG: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("empty chart")?;
    resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| format!("chart PNG: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axis_maxima_and_ticks() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.3), 10.0);
        assert_eq!(nice_max(13.0), 20.0);
        assert_eq!(nice_max(0.04), 0.05);
        assert_eq!(nice_max(200.0), 200.0);
        let labels = |t: Vec<f64>| t.into_iter().map(format_tick).collect::<Vec<_>>().join(" ");
        assert_eq!(labels(nice_ticks(0.0, 0.83)), "0 0.2 0.4 0.6 0.8 1");
        assert_eq!(labels(nice_ticks(0.0, 37.0)), "0 5 10 15 20 25 30 35 40");
        assert_eq!(labels(log_ticks(0.5, 20.0)), "0.5 1 2 5 10 20");
        assert_eq!(labels(log_ticks(0.8, 4.5)), "0.8 0.9 1 2 3 4");
        assert_eq!(labels(log_ticks(0.01, 100.0)), "0.01 0.1 1 10 100");
        assert_eq!(labels(log_ticks(0.0001, 0.01)), "0.0001 0.0002 0.0005 0.001 0.002 0.005 0.01");
    }

    #[test]
    fn every_scheme_has_its_own_colour_and_marker_in_every_figure() {
        let styles: Vec<Style> = Scheme::all_names().iter().map(|s| scheme_style(s, 99)).collect();
        for (i, a) in styles.iter().enumerate() {
            for (j, b) in styles.iter().enumerate().skip(i + 1) {
                assert!(a != b, "schemes {i} and {j} share a style");
                if j < SCHEME_COLOURS.len() {
                    assert!(a.colour != b.colour && a.marker != b.marker);
                }
            }
        }
        // Whatever else a figure holds, a scheme keeps its style.
        assert_eq!(scheme_style("PB", 0), scheme_style("PB", 7));
    }

    #[test]
    fn a_long_series_draws_at_most_the_markers_asked_for_and_its_whole_line() {
        let chart = |max_markers| LineChart {
            title: "queue".into(),
            x_label: "s".into(),
            y_label: "jobs".into(),
            x_range: (0.0, 200.0),
            y_range: (0.0, 10.0),
            log_y: false,
            series: vec![Series {
                name: "GS".into(),
                style: scheme_style("GS", 0),
                points: (0..200).map(|k| (k as f64, (k % 10) as f64)).collect(),
                clipped_from: None,
                y_errors: Vec::new(),
                x_errors: Vec::new(),
                y_intervals: Vec::new(),
            }],
            legend_notes: Vec::new(),
            max_markers,
        };
        // One marker more in the legend; every point stays on the line.
        let markers = |svg: &str| svg.matches("<title>GS: ").count();
        let line_points =
            |svg: &str| svg.split("<polyline points=\"").nth(1).unwrap().split('"').next().unwrap().split(' ').count();
        let (every, thinned) = (chart(None).to_svg(), chart(Some(20)).to_svg());
        assert_eq!((markers(&every), markers(&thinned)), (200, 20));
        assert_eq!((line_points(&every), line_points(&thinned)), (200, 200));
    }

    #[test]
    fn bars_scale_to_the_axis_and_escape_text() {
        let chart = StackedBarChart {
            title: "a < b".into(),
            unit: "seconds".into(),
            segment_names: vec!["wait".into(), "run".into()],
            bars: vec![
                StackedBar { label: "Local".into(), segments: vec![5.0, 5.0], whisker: (0.0, 0.0) },
                StackedBar { label: "GS".into(), segments: vec![0.0, 2.5], whisker: (0.5, 0.5) },
            ],
            note: Some("* saturated".into()),
        };
        let svg = chart.to_svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("a &lt; b") && svg.contains("* saturated"));
        // Local's 10 s fills the whole plot; GS's 2.5 s a quarter of it.
        let plot_w = svg_width(&svg) - label_width(&["Local", "GS"]) - 70.0;
        assert!(svg.contains(&format!(r##"width="{:.1}" height="26" fill="#0072B2""##, plot_w / 2.0)), "{svg}");
        assert!(svg.contains(&format!(r##"width="{:.1}" height="26" fill="#E69F00""##, plot_w / 4.0)), "{svg}");
    }

    fn svg_width(svg: &str) -> f64 {
        let start = svg.find("width=\"").unwrap() + 7;
        svg[start..].split('"').next().unwrap().parse().unwrap()
    }

    fn label_width(labels: &[&str]) -> f64 {
        labels.iter().map(|l| text_width(l, 12.0)).fold(60.0, f64::max) + 16.0
    }

    #[test]
    fn a_long_title_widens_the_canvas_instead_of_being_cut() {
        let title = "E2 — WL4 (CPU-bound): mean response time, wait and execution, per scheme, 3 seeds";
        let chart = StackedBarChart {
            title: title.into(),
            unit: "s".into(),
            segment_names: vec!["wait".into()],
            bars: vec![StackedBar { label: "GS".into(), segments: vec![1.0], whisker: (0.0, 0.0) }],
            note: None,
        };
        assert!(svg_width(&chart.to_svg()) >= text_width(title, 15.0) + 10.0);
    }
}
