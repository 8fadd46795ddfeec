//! `gemm bench --plot FILE`: TFLOP/s against matrix size, one line per kernel and per peer,
//! drawn as an SVG like the seeds' figures.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use crate::bench::Record;

/// One series: `(size, TFLOP/s)` points in sweep order.
type Series = Vec<(f64, f64)>;

pub fn draw(record: &Record, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    // GPU figures in TFLOP/s; CPU figures in GFLOP/s, one line per thread count.
    let gpu = record.backend == "gpu";
    let (scale, unit) = if gpu { (1.0, "TFLOP/s") } else { (1e3, "GFLOP/s") };
    let label =
        |name: &str, threads: usize| if gpu { name.to_string() } else { format!("{name}, {threads} thr") };
    let mut series: BTreeMap<String, Series> = BTreeMap::new();
    for row in &record.rows {
        series.entry(label(&row.kernel, row.threads)).or_default().push((row.n as f64, row.tflops * scale));
        for peer in &row.peers {
            let points = series.entry(label(&peer.name, row.threads)).or_default();
            if points.last().is_none_or(|&(n, _)| n != row.n as f64) {
                points.push((row.n as f64, peer.tflops * scale));
            }
        }
    }
    let x_max = record.rows.iter().map(|r| r.n).max().unwrap_or(1) as f64;
    let x_min = record.rows.iter().map(|r| r.n).min().unwrap_or(0) as f64;
    let y_max = series.values().flatten().map(|&(_, y)| y).fold(0.0, f64::max) * 1.15;

    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("SGEMM, {} ({})", record.device, record.date), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_min..x_max, 0.0..y_max.max(1e-3))?;
    chart.configure_mesh().x_desc("m = n = k").y_desc(unit).draw()?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let ours = record.rows.iter().any(|r| label(&r.kernel, r.threads) == *name);
        let style = if name == "cublas" {
            BLACK.stroke_width(3)
        } else {
            color.stroke_width(if ours { 3 } else { 1 })
        };
        chart
            .draw_series(LineSeries::new(points.iter().copied(), style))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, style.filled())))?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}
