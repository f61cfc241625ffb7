//! Writing results: JSON, CSV, an SVG line plot, and aligned tables for the terminal.

use std::path::Path;

use anyhow::{Context, Result};
use plotters::prelude::*;

/// Writes `value` as pretty JSON.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// Writes a CSV file with a header row.
pub fn write_csv(path: &Path, header: &[&str], rows: &[Vec<String>]) -> Result<()> {
    let mut text = header.join(",") + "\n";
    for row in rows {
        text += &(row.join(",") + "\n");
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// An aligned text table.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].len()).chain([header[c].len()]).max().unwrap_or(0))
        .collect();
    let line =
        |cells: Vec<&str>| cells.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect::<Vec<_>>().join("  ");
    let mut out = line(header.to_vec()) + "\n";
    for row in rows {
        out += &(line(row.iter().map(String::as_str).collect()) + "\n");
    }
    out
}

/// The same table in Markdown.
pub fn markdown_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out =
        format!("| {} |\n|{}|\n", header.join(" | "), header.iter().map(|_| "---").collect::<Vec<_>>().join("|"));
    for row in rows {
        out += &format!("| {} |\n", row.join(" | "));
    }
    out
}

/// One line of a plot: a label and its (x, y) points.
pub struct Series {
    /// The legend label.
    pub label: String,
    /// The points.
    pub points: Vec<(f64, f64)>,
}

/// Draws `series` as lines with markers into an SVG file.
pub fn line_plot(path: &Path, title: &str, x_label: &str, y_label: &str, series: &[Series]) -> Result<()> {
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (x_max, y_max) = (xs.fold(1.0f64, f64::max), ys.fold(1.0f64, f64::max));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max * 1.05, 0.0..y_max * 1.1)?;
    chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw()?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}
