//! SVG plots of a run, on the true clock with nemesis periods shaded: operation latency by
//! operation type, lease ownership by fencing token, and each node's clock offset.
//!
//! Clock offsets are read from the events themselves (`local_ns - time_ns`, every event a node
//! stamped), which already includes every jump and drift the nemesis applied; the jumps and
//! drift changes are marked as vertical lines.

use std::collections::BTreeMap;
use std::fmt::Write;

use fencer_harness::{EventType, Op, PackedHistory};

use super::escape;
use super::model::Model;
use super::svg::{op_colour, px};
use fencer_harness::words::secs;

/// The plot files a run directory holds, in the order [`render_plots`] returns them.
pub const PLOT_FILES: [&str; 3] = ["latency.svg", "leases.svg", "clocks.svg"];

const WIDTH: f64 = 1000.0;
/// Latencies below this are drawn on it (a log scale has no zero).
const LATENCY_FLOOR_MS: f64 = 0.1;
const HEIGHT: f64 = 380.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 40.0;

/// Series colours for workers and nodes (cycled).
const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// Renders the three plots for `history`: (file name, SVG text), as [`PLOT_FILES`].
pub fn render_plots(history: &PackedHistory) -> Vec<(&'static str, String)> {
    let model = Model::new(history);
    PLOT_FILES
        .into_iter()
        .enumerate()
        .map(|(position, name)| {
            let mut text = String::new();
            plot(&model, position, &mut text);
            (name, text)
        })
        .collect()
}

/// Writes the plot named `PLOT_FILES[position]` of the history `model` read to `out`. Once
/// `out` fails every later write fails too, so the caller reads the outcome from its sink.
pub(crate) fn plot(model: &Model<'_>, position: usize, out: &mut dyn Write) {
    match position {
        0 => latency(model, out),
        1 => leases(model, out),
        _ => clocks(model, out),
    }
}

/// A 1-2-5 step giving about `count` ticks over `span`.
fn nice_step(span: f64, count: f64) -> f64 {
    let raw = (span / count).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    let ratio = raw / power;
    let nice = if ratio <= 1.0 {
        1.0
    } else if ratio <= 2.0 {
        2.0
    } else if ratio <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// One chart: axes, shading and a legend around series drawn by the caller, written straight
/// to `out` (a run's file), so a plot of millions of calls is never held whole in memory.
struct Chart<'w> {
    out: &'w mut dyn Write,
    x_max_ns: u64,
    y_min: f64,
    y_max: f64,
    /// The y values are log10 of what the labels show.
    log_y: bool,
    legend: Vec<(String, String)>,
}

impl<'w> Chart<'w> {
    fn new(
        out: &'w mut dyn Write,
        title: &str,
        y_label: &str,
        x_max_ns: u64,
        y_min: f64,
        y_max: f64,
    ) -> Chart<'w> {
        let (y_min, y_max) = if y_max > y_min {
            (y_min, y_max)
        } else {
            (y_min - 1.0, y_min + 1.0)
        };
        let chart = Chart {
            out,
            x_max_ns: x_max_ns.max(1_000_000),
            y_min,
            y_max,
            log_y: false,
            legend: Vec::new(),
        };
        let _ = write!(
            chart.out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"11\">\n\
             <rect width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"#fff\"/>\n\
             <text x=\"{LEFT}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>\n\
             <text transform=\"translate(16 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">true time (s); shaded: nemesis faults</text>\n",
            escape::text(title),
            px(TOP + (HEIGHT - TOP - BOTTOM) / 2.0),
            escape::text(y_label),
            px(LEFT + (WIDTH - LEFT - RIGHT) / 2.0),
            px(HEIGHT - 6.0),
        );
        chart
    }

    fn x(&self, ns: u64) -> f64 {
        LEFT + ns as f64 / self.x_max_ns as f64 * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, value: f64) -> f64 {
        let plot_h = HEIGHT - TOP - BOTTOM;
        TOP + plot_h - (value - self.y_min) / (self.y_max - self.y_min) * plot_h
    }

    fn axes(&mut self) {
        let bottom = HEIGHT - BOTTOM;
        let right = WIDTH - RIGHT;
        let x_step = nice_step(self.x_max_ns as f64 / 1e9, 10.0);
        let mut t = 0.0;
        while t <= self.x_max_ns as f64 / 1e9 + 1e-9 {
            let x = self.x((t * 1e9) as u64);
            let _ = writeln!(
                self.out,
                "<line x1=\"{0}\" x2=\"{0}\" y1=\"{TOP}\" y2=\"{bottom}\" stroke=\"#eee\"/><text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">{2}</text>",
                px(x),
                px(bottom + 14.0),
                trim(t)
            );
            t += x_step;
        }
        let y_step = if self.log_y {
            1.0
        } else {
            nice_step(self.y_max - self.y_min, 6.0)
        };
        let mut v = (self.y_min / y_step).ceil() * y_step;
        while v <= self.y_max + 1e-9 {
            let y = self.y(v);
            let _ = writeln!(
                self.out,
                "<line x1=\"{LEFT}\" x2=\"{right}\" y1=\"{0}\" y2=\"{0}\" stroke=\"#eee\"/><text x=\"{1}\" y=\"{2}\" text-anchor=\"end\">{3}</text>",
                px(y),
                px(LEFT - 6.0),
                px(y + 4.0),
                trim(if self.log_y { 10f64.powf(v) } else { v })
            );
            v += y_step;
        }
        let _ = writeln!(
            self.out,
            "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>",
            px(right - LEFT),
            px(bottom - TOP)
        );
    }

    fn shade_faults(&mut self, model: &Model<'_>) {
        let bottom = HEIGHT - BOTTOM;
        for fault in &model.faults {
            let title = format!(
                "{} {} {}–{}",
                fault.f.name(),
                fault.target,
                secs(fault.start_ns),
                secs(fault.end_ns)
            );
            let x = self.x(fault.start_ns);
            if fault.end_ns > fault.start_ns {
                let _ = writeln!(
                    self.out,
                    "<rect class=\"fault\" x=\"{}\" y=\"{TOP}\" width=\"{}\" height=\"{}\" fill=\"#888\" fill-opacity=\"0.12\"><title>{}</title></rect>",
                    px(x),
                    px((self.x(fault.end_ns) - x).max(1.0)),
                    px(bottom - TOP),
                    escape::text(&title)
                );
            } else {
                let _ = writeln!(
                    self.out,
                    "<line class=\"fault\" x1=\"{0}\" x2=\"{0}\" y1=\"{TOP}\" y2=\"{bottom}\" stroke=\"#2471a3\" stroke-dasharray=\"4 3\"><title>{1}</title></line>",
                    px(x),
                    escape::text(&title)
                );
            }
        }
    }

    fn finish(self) {
        let x = WIDTH - RIGHT + 12.0;
        for (n, (name, colour)) in self.legend.iter().enumerate() {
            let y = TOP + 10.0 + n as f64 * 16.0;
            let _ = writeln!(
                self.out,
                "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{colour}\"/><text x=\"{}\" y=\"{}\">{}</text>",
                px(x),
                px(y - 9.0),
                px(x + 14.0),
                px(y),
                escape::text(name)
            );
        }
        let _ = self.out.write_str("</svg>\n");
    }
}

/// `2`, `0.5`, `-1.25`: a tick value without trailing zeros.
fn trim(value: f64) -> String {
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.to_string()
    }
}

fn latency(model: &Model<'_>, out: &mut dyn Write) {
    let max_ms = model
        .calls()
        .map(|call| (call.end_ns - call.start_ns) as f64 / 1e6)
        .fold(0.0, f64::max);
    // Log scale: millisecond replies and second-long timeouts both stay readable.
    let mut chart = Chart::new(
        out,
        "Operation latency by operation type (× = unknown outcome)",
        "latency (ms, log scale)",
        model.end_ns,
        LATENCY_FLOOR_MS.log10(),
        (max_ms * 1.5).max(10.0).log10(),
    );
    chart.log_y = true;
    chart.shade_faults(model);
    chart.axes();
    let mut seen: Vec<Op> = Vec::new();
    for call in model.calls() {
        if !seen.contains(&call.f) {
            seen.push(call.f);
        }
        let x = chart.x(call.start_ns);
        let latency_ms = (call.end_ns - call.start_ns) as f64 / 1e6;
        let y = chart.y(latency_ms.max(LATENCY_FLOOR_MS).log10());
        let colour = op_colour(call.f);
        if call.outcome == EventType::Info {
            let _ = writeln!(
                chart.out,
                "<path d=\"M{} {}l6 6m0 -6l-6 6\" stroke=\"{colour}\" stroke-width=\"1.5\"/>",
                px(x - 3.0),
                px(y - 3.0)
            );
        } else {
            let _ = writeln!(
                chart.out,
                "<circle cx=\"{}\" cy=\"{}\" r=\"2\" fill=\"{colour}\" fill-opacity=\"0.7\"/>",
                px(x),
                px(y)
            );
        }
    }
    seen.sort();
    chart.legend = seen
        .into_iter()
        .map(|f| (f.name().to_string(), op_colour(f).to_string()))
        .collect();
    chart.finish()
}

fn leases(model: &Model<'_>, out: &mut dyn Write) {
    let max_token = model.leases.iter().map(|l| l.token).max().unwrap_or(1) as f64;
    let min_token = model.leases.iter().map(|l| l.token).min().unwrap_or(0) as f64;
    let mut chart = Chart::new(
        out,
        "Lease ownership by fencing token (grant to expiry or release)",
        "fencing token",
        model.end_ns,
        (min_token - 1.0).max(0.0),
        max_token + 1.0,
    );
    chart.shade_faults(model);
    chart.axes();
    let mut owners: Vec<String> = Vec::new();
    for lease in &model.leases {
        let owner = lease.process.clone().unwrap_or_else(|| "unknown".into());
        let series = match owners.iter().position(|o| *o == owner) {
            Some(series) => series,
            None => {
                owners.push(owner.clone());
                owners.len() - 1
            }
        };
        let colour = PALETTE[series % PALETTE.len()];
        let y = chart.y(lease.token as f64);
        let x = chart.x(lease.start_ns);
        let title = format!(
            "token {} on {} held by {owner}, {}–{}",
            lease.token,
            lease.lock,
            secs(lease.start_ns),
            secs(lease.end_ns)
        );
        let _ = writeln!(
            chart.out,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"4\" fill=\"{colour}\"><title>{}</title></rect>",
            px(x),
            px(y - 2.0),
            px((chart.x(lease.end_ns) - x).max(1.0)),
            escape::text(&title)
        );
    }
    chart.legend = owners
        .into_iter()
        .enumerate()
        .map(|(n, owner)| (owner, PALETTE[n % PALETTE.len()].to_string()))
        .collect();
    chart.finish()
}

fn clocks(model: &Model<'_>, out: &mut dyn Write) {
    // node → (true ns, offset ms), only where the offset changed, plus the last reading.
    let mut series: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
    for event in model.events() {
        let Some(local_ns) = event.local_ns else {
            continue;
        };
        // A clock jump records its target's reading after the jump: a step in that node's line.
        let node = match (event.kind, event.target) {
            (EventType::Nemesis, Some(target)) => target.to_string(),
            _ => event
                .process
                .split(':')
                .next()
                .unwrap_or_default()
                .to_string(),
        };
        let offset_ms = (i128::from(local_ns) - i128::from(event.time_ns)) as f64 / 1e6;
        let points = series.entry(node).or_default();
        if event.is(EventType::Nemesis, Op::ClockJump)
            && let Some(&(_, before_ms)) = points.last()
        {
            points.push((event.time_ns, before_ms));
        }
        match points.as_slice() {
            [.., before, last] if last.1 == offset_ms && before.1 == offset_ms => {
                let end = points.len() - 1;
                points[end] = (event.time_ns, offset_ms);
            }
            _ => points.push((event.time_ns, offset_ms)),
        }
    }
    let values = series.values().flatten().map(|(_, offset)| *offset);
    let min = values.clone().fold(0.0, f64::min);
    let max = values.fold(0.0, f64::max);
    let pad = ((max - min) * 0.08).max(1.0);
    let mut chart = Chart::new(
        out,
        "Clock offset per node (local clock minus true clock)",
        "offset (ms)",
        model.end_ns,
        min - pad,
        max + pad,
    );
    chart.shade_faults(model);
    chart.axes();
    for (n, (node, points)) in series.iter().enumerate() {
        let colour = PALETTE[n % PALETTE.len()];
        let path: Vec<String> = points
            .iter()
            .map(|(t, offset)| format!("{},{}", px(chart.x(*t)), px(chart.y(*offset))))
            .collect();
        let _ = writeln!(
            chart.out,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"><title>{}</title></polyline>",
            path.join(" "),
            escape::text(node)
        );
        chart.legend.push((node.clone(), colour.to_string()));
    }
    chart.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::{Event, History};

    fn plots(events: Vec<Event>) -> Vec<(&'static str, String)> {
        render_plots(&PackedHistory::pack(&History { events }))
    }

    fn ev(time_ms: u64, process: &str, kind: EventType, f: Op) -> Event {
        Event {
            time_ns: time_ms * 1_000_000,
            ..Event::new(process, kind, f)
        }
    }

    #[test]
    fn ticks_are_one_two_five_steps() {
        assert_eq!(nice_step(100.0, 10.0), 10.0);
        assert_eq!(nice_step(30.0, 10.0), 5.0);
        assert_eq!(nice_step(0.9, 6.0), 0.2);
        assert_eq!(trim(2.500), "2.5");
        assert_eq!(trim(-0.0), "0");
    }

    #[test]
    fn clock_plot_follows_a_jump_and_names_each_node() {
        let mut before = ev(1_000, "w1", EventType::Invoke, Op::Read);
        before.local_ns = Some(1_000_000_000);
        let mut done = ev(1_001, "w1", EventType::Ok, Op::Read);
        done.local_ns = Some(1_001_000_000);
        let mut jump = ev(2_000, "nemesis", EventType::Nemesis, Op::ClockJump);
        jump.target = Some("w1".into());
        jump.jump_ns = Some(-5_000_000_000);
        jump.local_ns = Some(-3_000_000_000);
        let mut after = ev(3_000, "w1:renew", EventType::Invoke, Op::Renew);
        after.local_ns = Some(-2_000_000_000);
        let events = vec![before, done, jump, after];
        let plots = plots(events);
        assert_eq!(plots.len(), 3);
        let (name, clocks) = &plots[2];
        assert_eq!(*name, "clocks.svg");
        // One series for w1 (its renewal task shares its clock): offsets 0, 0, -5000 ms.
        assert_eq!(clocks.matches("<polyline").count(), 1, "{clocks}");
        assert!(clocks.contains("<title>w1</title>"), "{clocks}");
        assert!(
            clocks.contains("stroke-dasharray"),
            "the jump is not marked"
        );
        assert!(!clocks.contains("<title>nemesis</title>"), "{clocks}");
        // The line steps straight down at the jump (same x, offset 0 then -5000 ms).
        let mut out = String::new();
        let chart = Chart::new(&mut out, "", "", 3_000_000_000, -5_400.0, 400.0);
        let at_jump = px(chart.x(2_000_000_000));
        let step = format!(
            "{at_jump},{} {at_jump},{}",
            px(chart.y(0.0)),
            px(chart.y(-5_000.0))
        );
        assert!(clocks.contains(&step), "{step} not in {clocks}");
    }

    #[test]
    fn latency_plot_marks_unknown_outcomes_with_a_cross() {
        let events = vec![
            ev(0, "w1", EventType::Invoke, Op::Write),
            ev(1_000, "w1", EventType::Info, Op::Write),
            ev(1_000, "w1", EventType::Invoke, Op::Read),
            ev(1_002, "w1", EventType::Ok, Op::Read),
        ];
        let latency = &plots(events)[0].1;
        assert_eq!(latency.matches("<path").count(), 1);
        assert_eq!(latency.matches("<circle").count(), 1);
        assert!(latency.contains(">write</text>") && latency.contains(">read</text>"));
    }
}
