//! The size sweep's PNG plot (issue 18): convergence time and the operator's peak RSS against the
//! number of Ingresses, drawn with `plotters` into a bitmap.
//!
//! Text is rendered with `plotters`' `ab_glyph` feature from DejaVu Sans (Debian's
//! `fonts-dejavu-core`, which `make deps` installs), so no fontconfig or system font lookup is
//! involved.

use std::path::Path;

use anyhow::{Context as _, Result};
use plotters::prelude::*;

/// Where `fonts-dejavu-core` installs DejaVu Sans.
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// One size of the sweep: `(Ingresses, convergence seconds, the operator's peak RSS in MiB)`.
pub type Point = (usize, f64, f64);

/// Writes a 1000x600 PNG at `path`: convergence time (left axis, seconds) and peak RSS (right
/// axis, MiB) per Ingress count, one line each, with `title` above.
/// Errors: the font is missing (install `fonts-dejavu-core`), or the file cannot be written.
pub fn draw(path: &Path, title: &str, points: &[Point]) -> Result<()> {
    let font = std::fs::read(FONT)
        .with_context(|| format!("{FONT}: install fonts-dejavu-core (`make deps`)"))?;
    // plotters keeps the registered font for the process's lifetime.
    plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(font.into()))
        .map_err(|_| anyhow::anyhow!("{FONT} is not a font plotters can read"))?;

    let max_n = points.iter().map(|p| p.0).max().unwrap_or(1) as f64;
    let max_t = points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.15;
    let max_m = points.iter().map(|p| p.2).fold(1.0, f64::max) * 1.15;
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        // A long title (sizes, profile, operator binary) gets a smaller font to fit 1000 px.
        .caption(
            title,
            (
                "sans-serif",
                (1700 / title.len().max(1)).clamp(12, 22) as u32,
            ),
        )
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .right_y_label_area_size(70)
        .build_cartesian_2d(0.0..max_n * 1.05, 0.0..max_t)?
        .set_secondary_coord(0.0..max_n * 1.05, 0.0..max_m);
    chart
        .configure_mesh()
        .x_desc("Ingresses (2 Services each)")
        .y_desc("convergence time (s)")
        .label_style(("sans-serif", 15))
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_desc("operator peak RSS (MiB)")
        .label_style(("sans-serif", 15))
        .draw()?;
    let time: Vec<(f64, f64)> = points.iter().map(|p| (p.0 as f64, p.1)).collect();
    let rss: Vec<(f64, f64)> = points.iter().map(|p| (p.0 as f64, p.2)).collect();
    chart
        .draw_series(LineSeries::new(time.clone(), BLUE.stroke_width(2)))?
        .label("convergence time (s, left)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    chart.draw_series(time.iter().map(|&p| Circle::new(p, 4, BLUE.filled())))?;
    chart
        .draw_secondary_series(LineSeries::new(rss.clone(), RED.stroke_width(2)))?
        .label("operator peak RSS (MiB, right)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED.stroke_width(2)));
    chart.draw_secondary_series(rss.iter().map(|&p| TriangleMarker::new(p, 5, RED.filled())))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
