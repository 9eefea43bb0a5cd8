//! Small, dependency-free SVG charts for result folders: what people would
//! rather look at than read. Output is plain text with fixed number
//! formatting, so the same results give the same bytes.

use std::fmt::Write;

/// One bar made of stacked segments (values in the chart's unit).
pub struct StackedBar {
    pub label: String,
    pub segments: Vec<f64>,
}

pub struct StackedBarChart {
    pub title: String,
    pub unit: String,
    pub segment_names: Vec<String>,
    pub bars: Vec<StackedBar>,
}

/// Colour-blind-safe palette (Okabe-Ito).
const COLOURS: [&str; 6] = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#999999", "#D55E00"];

const WIDTH: f64 = 720.0;
const LABEL_W: f64 = 90.0;
const BAR_H: f64 = 26.0;
const GAP: f64 = 12.0;
const TOP: f64 = 48.0;

/// The opening of a chart: the root element, a white background, the title.
fn svg_start(width: f64, height: f64, title: &str, title_x: f64, title_y: f64) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, sans-serif" font-size="12">"#
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

impl StackedBarChart {
    /// Render as horizontal stacked bars with an axis and a legend.
    pub fn to_svg(&self) -> String {
        let plot_w = WIDTH - LABEL_W - 60.0;
        let height = TOP + self.bars.len() as f64 * (BAR_H + GAP) + 70.0;
        let total = |b: &StackedBar| b.segments.iter().filter(|v| v.is_finite()).sum::<f64>();
        let max = nice_max(self.bars.iter().map(total).fold(0.0, f64::max));
        let x = |v: f64| LABEL_W + plot_w * (v / max).clamp(0.0, 1.0);
        let mut svg = svg_start(WIDTH, height, &self.title, LABEL_W, 22.0);
        for (i, bar) in self.bars.iter().enumerate() {
            let y = TOP + i as f64 * (BAR_H + GAP);
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                LABEL_W - 8.0,
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
                    COLOURS[k % COLOURS.len()],
                    escape(&self.segment_names[k]),
                    format_value(v)
                );
                start += v;
            }
            let _ = writeln!(
                svg,
                r##"<text x="{:.1}" y="{:.1}" fill="#333">{}</text>"##,
                x(start) + 4.0,
                y + BAR_H * 0.68,
                format_value(start)
            );
        }
        let axis_y = TOP + self.bars.len() as f64 * (BAR_H + GAP);
        let _ = writeln!(
            svg,
            r##"<line x1="{LABEL_W}" y1="{axis_y:.1}" x2="{:.1}" y2="{axis_y:.1}" stroke="#333"/>"##,
            x(max)
        );
        for k in 0..=4 {
            let v = max * k as f64 / 4.0;
            let _ = writeln!(
                svg,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#333">{}</text>"##,
                x(v),
                axis_y + 16.0,
                format_tick(v)
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LABEL_W + plot_w / 2.0,
            axis_y + 34.0,
            escape(&self.unit)
        );
        let mut legend_x = LABEL_W;
        for (k, name) in self.segment_names.iter().enumerate() {
            let _ = writeln!(
                svg,
                r#"<rect x="{legend_x:.1}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                axis_y + 46.0,
                COLOURS[k % COLOURS.len()],
                legend_x + 16.0,
                axis_y + 56.0,
                escape(name)
            );
            legend_x += 24.0 + 7.0 * name.len() as f64;
        }
        svg.push_str("</svg>\n");
        svg
    }
}

/// Axis ticks: no trailing zeros.
fn format_tick(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn format_value(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// One line of a line chart. A point with `clipped` is drawn at the top edge
/// with an arrow: its value left the chart (a saturated run).
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub clipped_from: Option<usize>,
    /// Error bar half-heights, one per point (empty: none drawn).
    pub y_errors: Vec<f64>,
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
}

const LINE_COLOURS: [&str; 10] =
    ["#000000", "#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#999999", "#882255", "#44AA99"];
const DASHES: [&str; 3] = ["", "6,3", "2,3"];

impl LineChart {
    /// The y value as drawn: its logarithm on a log axis.
    fn scale_y(&self, y: f64) -> f64 {
        if self.log_y {
            y.max(1e-12).log10()
        } else {
            y
        }
    }

    /// Grid lines on y: decades on a log axis, tenths of the range otherwise.
    fn y_ticks(&self) -> Vec<f64> {
        let (y0, y1) = (self.scale_y(self.y_range.0), self.scale_y(self.y_range.1));
        if self.log_y {
            ((y0.floor() as i32)..=(y1.ceil() as i32))
                .map(|decade| 10f64.powi(decade))
                .filter(|v| v.log10() - y0 >= -1e-9 && v.log10() - y1 <= 1e-9)
                .collect()
        } else {
            (0..=10).map(|k| y0 + (y1 - y0) * k as f64 / 10.0).collect()
        }
    }

    pub fn to_svg(&self) -> String {
        let (w, h) = (760.0, 480.0);
        let (left, right, top, bottom) = (70.0, 150.0, 40.0, 50.0);
        let (pw, ph) = (w - left - right, h - top - bottom);
        let (x0, x1) = self.x_range;
        let (y0, y1) = (self.scale_y(self.y_range.0), self.scale_y(self.y_range.1));
        let px = |x: f64| left + pw * (x - x0) / (x1 - x0);
        let py = |y: f64| top + ph * (1.0 - (self.scale_y(y) - y0) / (y1 - y0)).clamp(0.0, 1.0);
        let mut svg = svg_start(w, h, &self.title, left, 24.0);
        for v in self.y_ticks() {
            let y = py(v);
            let _ =
                writeln!(svg, r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/>"##, left + pw);
            let _ = writeln!(
                svg,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{}</text>"##,
                left - 6.0,
                y + 4.0,
                format_tick(v)
            );
        }
        for k in 0..=10 {
            let v = x0 + (x1 - x0) * k as f64 / 10.0;
            let x = px(v);
            let _ = writeln!(svg, r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/>"##, top + ph);
            let _ = writeln!(
                svg,
                r##"<text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#333">{}</text>"##,
                top + ph + 16.0,
                format_tick(v)
            );
        }
        let _ = writeln!(svg, r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##);
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            left + pw / 2.0,
            h - 12.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            svg,
            r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
            top + ph / 2.0,
            top + ph / 2.0,
            escape(&self.y_label)
        );
        for (i, series) in self.series.iter().enumerate() {
            let colour = LINE_COLOURS[i % LINE_COLOURS.len()];
            let dash = DASHES[i / LINE_COLOURS.len() % DASHES.len()];
            let shown = series.clipped_from.map_or(series.points.len(), |c| (c + 1).min(series.points.len()));
            let path: Vec<String> = series.points[..shown]
                .iter()
                .enumerate()
                .map(|(k, &(x, y))| {
                    let y = if Some(k) >= series.clipped_from && series.clipped_from.is_some() { top } else { py(y) };
                    format!("{:.1},{:.1}", px(x), y)
                })
                .collect();
            let _ = writeln!(
                svg,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>"#,
                path.join(" ")
            );
            for (&(x, y), &e) in series.points[..shown].iter().zip(&series.y_errors) {
                let _ = writeln!(
                    svg,
                    r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{colour}" stroke-width="1.5"/>"#,
                    py(y - e),
                    py(y + e),
                    x = px(x)
                );
            }
            for (k, &(x, y)) in series.points[..shown].iter().enumerate() {
                let clipped = series.clipped_from.is_some_and(|c| k >= c);
                if clipped {
                    let (cx, cy) = (px(x), top);
                    let _ = writeln!(
                        svg,
                        r#"<path d="M{:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z" fill="{colour}"><title>{}: saturated</title></path>"#,
                        cx - 5.0,
                        cy + 8.0,
                        cx + 5.0,
                        cy + 8.0,
                        cx,
                        cy,
                        escape(&series.name)
                    );
                } else {
                    let _ = writeln!(
                        svg,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{}: {} at {}</title></circle>"#,
                        px(x),
                        py(y),
                        escape(&series.name),
                        format_value(y),
                        format_value(x)
                    );
                }
            }
            let ly = top + 14.0 + 18.0 * i as f64;
            let _ = writeln!(
                svg,
                r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                left + pw + 12.0,
                left + pw + 36.0,
                left + pw + 42.0,
                ly + 4.0,
                escape(&series.name)
            );
        }
        svg.push_str("</svg>\n");
        svg
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
    fn nice_axis_maxima() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.3), 10.0);
        assert_eq!(nice_max(13.0), 20.0);
        assert_eq!(nice_max(0.04), 0.05);
        assert_eq!(nice_max(200.0), 200.0);
    }

    #[test]
    fn bars_scale_to_the_axis_and_escape_text() {
        let chart = StackedBarChart {
            title: "a < b".into(),
            unit: "seconds".into(),
            segment_names: vec!["wait".into(), "run".into()],
            bars: vec![
                StackedBar { label: "Local".into(), segments: vec![5.0, 5.0] },
                StackedBar { label: "GS".into(), segments: vec![0.0, 2.5] },
            ],
        };
        let svg = chart.to_svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("a &lt; b"));
        // Local's 10 s fills the whole 570-pixel plot; GS's 2.5 s a quarter of it.
        assert!(svg.contains(r##"width="285.0" height="26" fill="#0072B2""##), "{svg}");
        assert!(svg.contains(r##"width="142.5" height="26" fill="#E69F00""##), "{svg}");
    }
}
