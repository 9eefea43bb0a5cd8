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
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            svg,
            r#"<text x="{LABEL_W}" y="22" font-size="15" font-weight="bold">{}</text>"#,
            escape(&self.title)
        );
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
