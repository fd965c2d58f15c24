//! `timeline.html`: one swimlane per worker (and its renewal task), the nemesis, the lock
//! service and the store, on the true clock.
//!
//! The SVG is laid out here for the whole run (or its first drawn window); every positioned
//! element carries its true times as numeric `data-a`/`data-b` attributes (milliseconds), and
//! the inline script re-positions elements from those when the reader zooms or pans. The script
//! never reads a user string, so escaping the markup ([`escape::text`]) is all the escaping the
//! page needs.

use std::collections::BTreeMap;
use std::fmt::Write;

use fencer_harness::{EventType, FaultEdge, Op, PackedHistory, roles};

use super::escape;
use super::model::{LeaseEnd, Model, partition_sides};
use super::svg::{ms, op_colour, px, token_colour};
use super::{ReportAnomaly, ReportInput};
use fencer_harness::words::{both_clocks, describe, secs};

/// Histories with more client calls than this are drawn only around their anomalies (or, with
/// none, from the start up to this many calls): a browser cannot pan a million SVG elements.
pub const MAX_DRAWN_OPS: usize = 10_000;

/// How much true time is drawn on each side of an anomaly's evidence in a windowed timeline.
const WINDOW_PAD_NS: u64 = 10_000_000_000;

const LABEL_W: f64 = 130.0;
const PLOT_W: f64 = 1400.0;
const AXIS_H: f64 = 26.0;
const LANE_H: f64 = 34.0;
const THIN_H: f64 = 20.0;
const LOCK_H: f64 = 48.0;

/// Renders the timeline page for `history` with the verdict in `input`.
pub fn render_timeline(history: &PackedHistory, input: &ReportInput) -> String {
    let mut text = String::new();
    page(&Model::new(history), input, &mut text);
    text
}

/// Writes the timeline page of the history `model` read, with the verdict in `input`, to
/// `page`. It is written as it is drawn: the windows around many anomalies of a long history
/// can hold hundreds of thousands of calls. Once `page` fails every later write fails too, so
/// the caller reads the outcome from its sink.
pub(crate) fn page(model: &Model<'_>, input: &ReportInput, page: &mut dyn Write) {
    let windows = windows(model, &input.anomalies);
    head(page, input);
    if let Some(windows) = &windows {
        let spans: Vec<String> = windows
            .iter()
            .map(|(a, b)| format!("{}–{}", secs(*a), secs(*b)))
            .collect();
        let reason = if input.anomalies.is_empty() {
            "only its beginning is drawn"
        } else {
            "only the periods around its anomalies are drawn"
        };
        let _ = write!(
            page,
            "<p class=\"notice\" id=\"windowed\">This history has {} client calls, more than \
             {MAX_DRAWN_OPS}: {reason} ({}). The other events are in history.jsonl.</p>",
            model.ops(),
            spans.join(", ")
        );
    }
    if model.has_read_back_log() {
        let _ = page.write_str(
            "<p class=\"notice\" id=\"read-back\">This run's server logs were read back \
             after it: their entries hold the store's order and the lock service's own clock, \
             but no true time, so they are not drawn on the time axis (nor are the leases they \
             record). The anomalies below tell them by store order and lock clock.</p>\n",
        );
    }
    let _ = page.write_str(CONTROLS);
    let drawing = Drawing::new(model, windows);
    drawing.svg(page, &input.anomalies);
    anomaly_list(page, model, &input.anomalies);
    for part in [LEGEND, "<script>", SCRIPT, "</script>\n</body>\n</html>\n"] {
        let _ = page.write_str(part);
    }
}

fn head(page: &mut dyn Write, input: &ReportInput) {
    let title = escape::text(&input.title);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<link rel=\"icon\" href=\"data:,\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>fencer timeline: {title}</title>\n<style>"
    );
    for line in STYLE.lines() {
        let _ = page.write_str(line);
    }
    let _ = write!(
        page,
        "</style>\n</head>\n<body>\n\
         <header><h1>{title}</h1>\n<p class=\"verdict v-{}\" id=\"verdict\">{}</p>\n\
         <p class=\"settings\">{}</p></header>\n",
        escape::text(&input.validity),
        escape::text(&input.summary),
        escape::text(&input.settings),
    );
}

/// True-time windows to draw, or `None` to draw everything.
fn windows(model: &Model<'_>, anomalies: &[ReportAnomaly]) -> Option<Vec<(u64, u64)>> {
    if model.ops() <= MAX_DRAWN_OPS {
        return None;
    }
    let time_of = |index: u64| {
        model
            .get(index as usize)
            .filter(|event| model.has_time(event))
            .map(|event| event.time_ns)
    };
    let mut windows: Vec<(u64, u64)> = anomalies
        .iter()
        .filter_map(|anomaly| {
            let first = anomaly.events.iter().filter_map(|&i| time_of(i)).min()?;
            let last = anomaly.events.iter().filter_map(|&i| time_of(i)).max()?;
            Some((
                first.saturating_sub(WINDOW_PAD_NS),
                last.saturating_add(WINDOW_PAD_NS).min(model.end_ns),
            ))
        })
        .collect();
    if windows.is_empty() {
        let until = model.call(MAX_DRAWN_OPS).start_ns;
        windows.push((0, until));
    }
    windows.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (a, b) in windows {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    Some(merged)
}

/// Lane geometry and the time scale of the first layout.
struct Drawing<'m, 'e> {
    model: &'m Model<'e>,
    /// Top y of each lane.
    lane_y: Vec<f64>,
    /// Height of each lane.
    lane_h: Vec<f64>,
    height: f64,
    view: (u64, u64),
    windows: Option<Vec<(u64, u64)>>,
}

impl<'m, 'e> Drawing<'m, 'e> {
    fn new(model: &'m Model<'e>, windows: Option<Vec<(u64, u64)>>) -> Drawing<'m, 'e> {
        let mut lane_y = Vec::new();
        let mut lane_h = Vec::new();
        let mut y = AXIS_H;
        for lane in &model.lanes {
            let h = if lane.thin {
                THIN_H
            } else if lane.name == "lock" {
                LOCK_H
            } else {
                LANE_H
            };
            lane_y.push(y);
            lane_h.push(h);
            y += h;
        }
        let view = match &windows {
            Some(windows) => windows[0],
            None => (0, model.end_ns.max(1_000_000)),
        };
        Drawing {
            model,
            lane_y,
            lane_h,
            height: y + 4.0,
            view,
            windows,
        }
    }

    fn x(&self, ns: u64) -> f64 {
        let span = (self.view.1.saturating_sub(self.view.0)).max(1) as f64;
        LABEL_W + (ns as f64 - self.view.0 as f64) / span * PLOT_W
    }

    fn drawn(&self, a: u64, b: u64) -> bool {
        match &self.windows {
            None => true,
            Some(windows) => windows.iter().any(|(w0, w1)| a <= *w1 && b >= *w0),
        }
    }

    /// A span from `a` to `b`, `y`..`y + h`.
    #[allow(clippy::too_many_arguments)]
    fn span(
        &self,
        out: &mut dyn Write,
        a: u64,
        b: u64,
        y: f64,
        h: f64,
        class: &str,
        fill: &str,
        title: &str,
    ) {
        let x = self.x(a);
        let w = (self.x(b) - x).max(1.0);
        let _ = write!(
            out,
            "<rect class=\"t {class}\" data-a=\"{}\" data-b=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"{fill}><title>{}</title></rect>",
            ms(a),
            ms(b),
            px(x),
            px(y),
            px(w),
            px(h),
            escape::text(title)
        );
    }

    /// A tick `w` wide at `t`.
    #[allow(clippy::too_many_arguments)]
    fn tick(
        &self,
        out: &mut dyn Write,
        t: u64,
        y: f64,
        h: f64,
        w: f64,
        class: &str,
        attrs: &str,
        title: &str,
    ) {
        let _ = write!(
            out,
            "<rect class=\"t {class}\" data-a=\"{}\" data-w=\"{w}\" x=\"{}\" y=\"{}\" width=\"{w}\" height=\"{}\"{attrs}><title>{}</title></rect>",
            ms(t),
            px(self.x(t) - w / 2.0),
            px(y),
            px(h),
            escape::text(title)
        );
    }

    /// A label at `a`; with `b`, hidden while the span is too narrow for it.
    fn label(&self, out: &mut dyn Write, a: u64, b: Option<u64>, y: f64, class: &str, text: &str) {
        let b_attr = b.map_or(String::new(), |b| format!(" data-b=\"{}\"", ms(b)));
        let hidden = match b {
            Some(b) if self.x(b) - self.x(a) < text.chars().count() as f64 * 6.5 + 4.0 => {
                " style=\"display:none\""
            }
            _ => "",
        };
        let _ = write!(
            out,
            "<text class=\"t {class}\" data-a=\"{}\"{b_attr} x=\"{}\" y=\"{}\"{hidden}>{}</text>",
            ms(a),
            px(self.x(a) + 2.0),
            px(y),
            escape::text(text)
        );
    }

    fn svg(&self, page: &mut dyn Write, anomalies: &[ReportAnomaly]) {
        let width = LABEL_W + PLOT_W + 10.0;
        let _ = write!(
            page,
            "<div id=\"timeline-wrap\"><svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" \
             viewBox=\"0 0 {width} {h}\" data-left=\"{LABEL_W}\" data-width=\"{PLOT_W}\" \
             data-end=\"{end}\" data-v0=\"{v0}\" data-v1=\"{v1}\">\n\
             <defs><clipPath id=\"plot-clip\"><rect x=\"{LABEL_W}\" y=\"0\" width=\"{PLOT_W}\" height=\"{h}\"/></clipPath></defs>\n",
            h = px(self.height),
            end = ms(self.model.end_ns),
            v0 = ms(self.view.0),
            v1 = ms(self.view.1),
        );
        for (lane_index, lane) in self.model.lanes.iter().enumerate() {
            let y = self.lane_y[lane_index];
            let h = self.lane_h[lane_index];
            let _ = writeln!(
                page,
                "<rect class=\"lane{}\" x=\"0\" y=\"{}\" width=\"{width}\" height=\"{}\"/>\
                 <text class=\"lane-name\" x=\"6\" y=\"{}\">{}</text>",
                if lane_index % 2 == 0 { " even" } else { "" },
                px(y),
                px(h),
                px(y + h / 2.0 + 4.0),
                escape::text(&lane.name)
            );
        }
        let _ = page.write_str("<g id=\"axis\"></g>\n<g clip-path=\"url(#plot-clip)\">\n");
        self.faults(page);
        self.leases(page);
        self.calls(page);
        self.notices(page);
        self.server_logs(page);
        self.evidence(page, anomalies);
        let _ = page.write_str("</g>\n</svg></div>\n");
    }

    fn lane(&self, name: &str) -> Option<(f64, f64)> {
        let index = self.model.lane_index(name)?;
        Some((self.lane_y[index], self.lane_h[index]))
    }

    fn faults(&self, out: &mut dyn Write) {
        for fault in &self.model.faults {
            if !self.drawn(fault.start_ns, fault.end_ns) {
                continue;
            }
            let event = self.model.event(fault.index);
            let title = format!(
                "#{} {}–{}: {}",
                fault.index,
                secs(fault.start_ns),
                secs(fault.end_ns),
                describe(&event.to_event())
            );
            let class = format!("fault f-{}", fault.f.name());
            if fault.f == Op::NetPartition {
                self.partition_sides(out, fault, event.value, &class, &title);
            }
            let mut lanes = vec!["nemesis".to_string(), fault.target.clone()];
            // A pause freezes the renewal tasks too; dropped renew replies are their loss.
            if matches!(fault.f, Op::Pause | Op::DropRenew) {
                lanes.extend(
                    self.model
                        .lanes
                        .iter()
                        .filter(|lane| {
                            roles::is_renewal_task(&lane.name)
                                && roles::worker_of(&lane.name) == fault.target
                        })
                        .map(|lane| lane.name.clone()),
                );
            }
            for lane in lanes {
                let Some((y, h)) = self.lane(&lane) else {
                    continue;
                };
                if fault.end_ns > fault.start_ns {
                    self.span(out, fault.start_ns, fault.end_ns, y, h, &class, "", &title);
                } else {
                    self.tick(out, fault.start_ns, y, h, 3.0, &class, "", &title);
                }
                if lane == "nemesis" {
                    let text = match (fault.f, event.jump_ns, event.drift_ppm) {
                        (Op::ClockJump, Some(jump), _) => {
                            format!(
                                "{} {}",
                                fault.target,
                                fencer_harness::words::secs_signed(jump)
                            )
                        }
                        (Op::ClockDrift, _, Some(ppm)) => format!("{} {ppm:+}ppm", fault.target),
                        (f, ..) => format!("{} {}", f.name(), fault.target),
                    };
                    let b = (fault.end_ns > fault.start_ns).then_some(fault.end_ns);
                    self.label(out, fault.start_ns, b, y + 13.0, "flabel", &text);
                }
            }
        }
        // Heals and resumes: ticks on the nemesis lane, so they can be cited as evidence.
        if let Some((y, h)) = self.lane("nemesis") {
            for (index, event) in self.model.events().enumerate() {
                if event.kind == EventType::Nemesis
                    && event.f.fault_edge() == Some(FaultEdge::End)
                    && self.drawn(event.time_ns, event.time_ns)
                {
                    let title = format!(
                        "#{index} {}: {}",
                        secs(event.time_ns),
                        describe(&event.to_event())
                    );
                    self.tick(
                        out,
                        event.time_ns,
                        y + h - 8.0,
                        8.0,
                        2.0,
                        "heal",
                        "",
                        &title,
                    );
                }
            }
        }
    }

    /// A net partition on the lane of every member it cut off, labelled with its side
    /// (`side 1/2: n1 n2`), so a reader sees who could reach whom.
    fn partition_sides(
        &self,
        out: &mut dyn Write,
        fault: &super::model::FaultSpan,
        value: Option<&str>,
        class: &str,
        title: &str,
    ) {
        let sides = partition_sides(value);
        for (side, members) in sides.iter().enumerate() {
            let text = format!("side {}/{}: {}", side + 1, sides.len(), members.join(" "));
            for member in members {
                let Some((y, h)) = self.lane(&format!("{}.{member}", fault.target)) else {
                    continue;
                };
                let title = format!("{title} — {member} on {text}");
                self.span(out, fault.start_ns, fault.end_ns, y, h, class, "", &title);
                self.label(
                    out,
                    fault.start_ns,
                    Some(fault.end_ns),
                    y + 13.0,
                    "flabel",
                    &text,
                );
            }
        }
    }

    fn leases(&self, out: &mut dyn Write) {
        // Rows on the lock lane, so overlapping leases are visibly stacked.
        let mut row_ends: Vec<u64> = Vec::new();
        let lock_lane = self.lane("lock");
        for lease in &self.model.leases {
            let row = match row_ends.iter().position(|&end| end <= lease.start_ns) {
                Some(row) => {
                    row_ends[row] = lease.end_ns;
                    row
                }
                None => {
                    row_ends.push(lease.end_ns);
                    row_ends.len() - 1
                }
            };
            if !self.drawn(lease.start_ns, lease.end_ns) {
                continue;
            }
            let colour = token_colour(lease.token);
            let ended = match lease.end {
                LeaseEnd::Released => "released",
                LeaseEnd::Expired => "expired",
                LeaseEnd::Lost => "lost in a lock service restart",
            };
            let title = format!(
                "lease on lock {} with token {} for {} (owner {}): granted {} (#{}), {} {}, {} renewal(s)",
                lease.lock,
                lease.token,
                lease.process.as_deref().unwrap_or("an unknown process"),
                fencer_harness::words::short_owner(&lease.owner),
                secs(lease.start_ns),
                lease.grant_index,
                ended,
                secs(lease.end_ns),
                lease.renewals_ns.len()
            );
            let fill = format!(" fill=\"{colour}\"");
            let label = format!("t{}", lease.token);
            if let Some((y, h)) = lease.process.as_deref().and_then(|p| self.lane(p)) {
                self.span(
                    out,
                    lease.start_ns,
                    lease.end_ns,
                    y + 3.0,
                    h - 6.0,
                    "lease",
                    &fill,
                    &title,
                );
                self.label(
                    out,
                    lease.start_ns,
                    Some(lease.end_ns),
                    y + 13.0,
                    "llabel",
                    &label,
                );
            }
            if let Some((y, h)) = lock_lane {
                let rows = 3.0;
                let row_h = (h - 4.0) / rows;
                let row_y = y + 2.0 + (row % 3) as f64 * row_h;
                self.span(
                    out,
                    lease.start_ns,
                    lease.end_ns,
                    row_y,
                    row_h - 1.0,
                    "lease lock-lease",
                    &fill,
                    &title,
                );
                self.label(
                    out,
                    lease.start_ns,
                    Some(lease.end_ns),
                    row_y + row_h - 4.0,
                    "llabel small",
                    &label,
                );
            }
        }
    }

    fn calls(&self, out: &mut dyn Write) {
        for call in self.model.calls() {
            if !self.drawn(call.start_ns, call.end_ns) {
                continue;
            }
            let Some((y, h)) = self.lane(call.process) else {
                continue;
            };
            let invoke = &self.model.event(call.invoke).to_event();
            let completion = call.completion.map(|c| self.model.event(c).to_event());
            let outcome = match call.outcome {
                EventType::Ok => "ok",
                EventType::Fail => "fail",
                _ => "info",
            };
            let mut title = format!(
                "#{} at {}: {}",
                call.invoke,
                both_clocks(invoke),
                describe(invoke)
            );
            match (call.completion, completion) {
                (Some(index), Some(done)) => {
                    let done = &done;
                    let _ = write!(
                        title,
                        "\n#{index} at {}: {}",
                        both_clocks(done),
                        describe(done)
                    );
                }
                _ => title.push_str("\nnever completed"),
            }
            let fill = format!(" fill=\"{}\"", op_colour(call.f));
            let bar_y = y + h / 2.0 - 3.0;
            let class = format!("call op-{} out-{outcome}", call.f.name());
            self.span(
                out,
                call.start_ns,
                call.end_ns,
                bar_y,
                6.0,
                &class,
                &fill,
                &title,
            );
            let marks_outcome = matches!(call.f, Op::Write | Op::Renew)
                || (call.f == Op::Acquire && call.outcome == EventType::Ok);
            if marks_outcome {
                let attrs = format!(" data-event=\"{}\"", call.completion.unwrap_or(call.invoke));
                self.tick(
                    out,
                    call.end_ns,
                    y + 2.0,
                    h - 4.0,
                    3.0,
                    &format!("done out-{outcome}"),
                    &attrs,
                    &title,
                );
            }
            if call.f == Op::Write {
                let token = invoke.token.map_or("?".into(), |t| t.to_string());
                let text = match call.outcome {
                    EventType::Ok => format!("✓t{token}"),
                    EventType::Fail => format!("✗t{token}"),
                    _ => format!("?t{token}"),
                };
                self.label(
                    out,
                    call.end_ns,
                    None,
                    y + h - 3.0,
                    &format!("wlabel out-{outcome}"),
                    &text,
                );
            } else if call.f == Op::Renew && call.outcome == EventType::Info {
                self.label(
                    out,
                    call.end_ns,
                    None,
                    y + h - 2.0,
                    "wlabel out-info",
                    "lost",
                );
            }
        }
    }

    /// What lock client libraries told their workers unprompted (a lease lost, a renewal
    /// made): a tick at the top of the worker's lane, labelled, so a reader sees when the
    /// worker heard it against the calls it made.
    fn notices(&self, out: &mut dyn Write) {
        for (index, event) in self.model.events().enumerate() {
            if event.kind != EventType::Notice || !self.drawn(event.time_ns, event.time_ns) {
                continue;
            }
            let Some((y, _)) = self.lane(event.process) else {
                continue;
            };
            let owned = event.to_event();
            let title = format!("#{index} at {}: {}", both_clocks(&owned), describe(&owned));
            let attrs = format!(" data-event=\"{index}\"");
            let class = format!("tell tell-{}", event.f.name());
            self.tick(out, event.time_ns, y, 7.0, 2.0, &class, &attrs, &title);
            if event.f == Op::Lost {
                self.label(out, event.time_ns, None, y + 8.0, "nlabel", "lost");
            }
        }
    }

    fn server_logs(&self, out: &mut dyn Write) {
        for (index, event) in self.model.events().enumerate() {
            if event.kind != EventType::Log
                || !self.model.has_time(&event)
                || !self.drawn(event.time_ns, event.time_ns)
            {
                continue;
            }
            let Some((y, h)) = self.lane(event.process) else {
                continue;
            };
            let owned = event.to_event();
            let title = format!("#{index} at {}: {}", both_clocks(&owned), describe(&owned));
            let attrs = format!(" data-event=\"{index}\"");
            let class = format!("log log-{}", event.f.name());
            if event.f == Op::Write {
                let colour = event.token.map_or("#666".into(), token_colour);
                let fill = format!("{attrs} fill=\"{colour}\"");
                self.tick(
                    out,
                    event.time_ns,
                    y + 3.0,
                    h - 6.0,
                    4.0,
                    &class,
                    &fill,
                    &title,
                );
                let text = format!("t{}", event.token.map_or("?".into(), |t| t.to_string()));
                self.label(out, event.time_ns, None, y + h - 4.0, "slabel", &text);
            } else {
                self.tick(
                    out,
                    event.time_ns,
                    y + h - 7.0,
                    7.0,
                    2.0,
                    &class,
                    &attrs,
                    &title,
                );
            }
        }
    }

    fn evidence(&self, out: &mut dyn Write, anomalies: &[ReportAnomaly]) {
        let mut cited: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (k, anomaly) in anomalies.iter().enumerate() {
            for &index in &anomaly.events {
                cited.entry(index).or_default().push(k);
            }
        }
        for (index, ks) in cited {
            let Some(event) = self.model.get(index as usize) else {
                continue;
            };
            let Some(lane) = self.model.lane_of(&event) else {
                continue;
            };
            if !self.model.has_time(&event) || !self.drawn(event.time_ns, event.time_ns) {
                continue;
            }
            let y = self.lane_y[lane];
            let h = self.lane_h[lane];
            let list: Vec<String> = ks.iter().map(|k| k.to_string()).collect();
            let owned = event.to_event();
            let title = format!(
                "evidence #{index} for anomaly {} at {}: {}",
                ks.iter()
                    .map(|k| (k + 1).to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                both_clocks(&owned),
                describe(&owned)
            );
            let _ = write!(
                out,
                "<circle class=\"t ev\" data-a=\"{}\" data-event=\"{index}\" data-anomalies=\"{}\" cx=\"{}\" cy=\"{}\" r=\"{}\"><title>{}</title></circle>",
                ms(event.time_ns),
                list.join(" "),
                px(self.x(event.time_ns)),
                px(y + h / 2.0),
                px((h / 2.0 - 2.0).min(9.0)),
                escape::text(&title)
            );
        }
    }
}

fn anomaly_list(page: &mut dyn Write, model: &Model<'_>, anomalies: &[ReportAnomaly]) {
    let warnings = anomalies.iter().filter(|anomaly| anomaly.warning).count();
    let counts = match warnings {
        0 => format!("Anomalies ({})", anomalies.len()),
        _ => format!(
            "Anomalies ({}) and warnings ({warnings})",
            anomalies.len() - warnings
        ),
    };
    let _ = write!(
        page,
        "<section id=\"anomaly-section\"><h2>{counts}</h2>\n<ol id=\"anomalies\">\n"
    );
    if anomalies.is_empty() {
        let _ = page.write_str("<li class=\"none\">No anomaly was found.</li>\n");
    }
    for (k, anomaly) in anomalies.iter().enumerate() {
        // Only events with a true time place a finding on the time axis.
        let times: Vec<u64> = anomaly
            .events
            .iter()
            .filter_map(|&index| model.get(index as usize))
            .filter(|event| model.has_time(event))
            .map(|event| event.time_ns)
            .collect();
        let (a, b, span) = match (times.iter().min(), times.iter().max()) {
            (Some(&a), Some(&b)) => (a, b, format!(" · {}–{}", secs(a), secs(b))),
            _ => (0, model.end_ns, String::new()),
        };
        let (item_class, kind) = if anomaly.warning {
            ("anomaly warning", " (warning)")
        } else {
            ("anomaly", "")
        };
        let cited: Vec<String> = anomaly.events.iter().map(|i| format!("#{i}")).collect();
        let _ = writeln!(
            page,
            "<li class=\"{item_class}\" id=\"anomaly-{k}\"><button class=\"goto\" data-k=\"{k}\" data-a=\"{}\" data-b=\"{}\">{}{kind}{span}</button>\
             <p>{}</p><p class=\"cited\">evidence: {}</p></li>",
            ms(a),
            ms(b),
            escape::text(&anomaly.class),
            escape::text(&anomaly.explanation),
            cited.join(" ")
        );
    }
    let _ = page.write_str("</ol></section>\n");
}

const CONTROLS: &str = "<div id=\"controls\"><button id=\"zoom-in\" title=\"zoom in\">+</button>\
<button id=\"zoom-out\" title=\"zoom out\">−</button><button id=\"reset\">whole run</button> \
<span id=\"range\"></span> <span class=\"hint\">wheel: zoom · drag: pan · hover: details · \
click an anomaly below to go to it</span></div>\n";

const LEGEND: &str = "<section id=\"legend\"><h2>Legend</h2><ul>\
<li><span class=\"sw\" style=\"background:hsl(137,70%,50%)\"></span> lease, grant to expiry or release, coloured by fencing token (tN)</li>\
<li><span class=\"sw\" style=\"background:#dd8452\"></span> write call; ✓tN accepted, ✗tN rejected, ?tN unknown</li>\
<li><span class=\"sw\" style=\"background:#8172b2\"></span> renew call (renewal lane); <b>lost</b>: reply never came</li>\
<li><span class=\"sw\" style=\"background:#4c72b0\"></span> acquire · <span class=\"sw\" style=\"background:#55a868\"></span> read · <span class=\"sw\" style=\"background:#64b5cd\"></span> release</li>\
<li><span class=\"sw\" style=\"background:#8e44ad\"></span> ownership check asked of the lock client library (its own calls on the check lane); a mark at the top of a worker's lane: a notice from its library, <b>lost</b> when it said the lease was lost</li>\
<li><span class=\"sw fault-sw\"></span> nemesis fault (pause, dropped renew replies, delayed writes, lock restart, server faults on the server's or the cluster member's lane); clock jumps and drift as marks; a net partition on each member's lane, labelled with its side</li>\
<li><span class=\"sw ev-sw\"></span> evidence of an anomaly (click an anomaly to focus it)</li>\
</ul><p>Times are on the true clock; tooltips give each event's own clock too.</p></section>\n";

/// The page's stylesheet, one rule group per line in the file. The page carries it on one
/// line: the lines are joined with nothing between them, so a rule split across lines must
/// not rely on the line break for a space.
const STYLE: &str = include_str!("timeline.css");

/// The page's script: re-positions every element from its `data-a`/`data-b` times when the
/// reader zooms or pans, and focuses an anomaly when it is clicked. The viewer's
/// Content-Security-Policy lets exactly this script run, by its hash.
pub const SCRIPT: &str = include_str!("timeline.js");

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::{Event, History};

    fn ev(time_ms: u64, process: &str, kind: EventType, f: Op) -> Event {
        Event {
            time_ns: time_ms * 1_000_000,
            ..Event::new(process, kind, f)
        }
    }

    fn indexed(mut events: Vec<Event>) -> Vec<Event> {
        for (i, event) in events.iter_mut().enumerate() {
            event.index = i as u64;
        }
        events
    }

    /// w1 writes a hostile value; its write (event 1) is cited as evidence.
    fn hostile() -> (Vec<Event>, ReportInput) {
        let value = "<script>alert(1)</script>";
        let mut invoke = ev(0, "w1", EventType::Invoke, Op::Write);
        invoke.value = Some(value.into());
        invoke.write_id = Some(value.into());
        invoke.token = Some(1);
        invoke.key = Some("k\"><img src=x onerror=alert(2)>".into());
        let mut log = ev(5, "store", EventType::Log, Op::Write);
        log.value = Some(value.into());
        log.write_id = Some(value.into());
        log.token = Some(1);
        let mut ok = invoke.clone();
        ok.kind = EventType::Ok;
        ok.time_ns = 9_000_000;
        let events = indexed(vec![invoke, log, ok]);
        let input = ReportInput {
            title: "<b>seed</b>".into(),
            validity: "invalid".into(),
            summary: "invalid: 1 stale-write-accepted".into(),
            settings: "store <i>x</i>".into(),
            anomalies: vec![ReportAnomaly {
                class: "stale-write-accepted".into(),
                events: vec![1],
                explanation: format!("the store applied {value}"),
                warning: false,
            }],
        };
        (events, input)
    }

    #[test]
    fn a_library_s_notices_its_checks_and_a_cancellation_are_drawn_on_their_worker_s_lane() {
        let lease = |mut event: Event| {
            event.lock = Some("L".into());
            event.owner = Some("0".repeat(32));
            event
        };
        let mut cancel = ev(4, "nemesis", EventType::Nemesis, Op::Cancel);
        cancel.target = Some("w1".into());
        let mut lost = lease(ev(6, "w1", EventType::Notice, Op::Lost));
        lost.error = Some("renewal refused".into());
        let events = indexed(vec![
            lease(ev(1, "w1", EventType::Invoke, Op::Check)),
            lease(ev(2, "w1:check", EventType::Invoke, Op::Renew)),
            lease(ev(3, "w1:check", EventType::Ok, Op::Renew)),
            lease(ev(3, "w1", EventType::Ok, Op::Check)),
            cancel,
            lost,
        ]);
        let input = ReportInput {
            title: "t".into(),
            validity: "valid".into(),
            summary: "valid".into(),
            settings: String::new(),
            anomalies: Vec::new(),
        };
        let page = render_timeline(&PackedHistory::pack(&History { events }), &input);
        assert!(
            page.contains("class=\"t tell tell-lost\""),
            "the notice is drawn"
        );
        assert!(page.contains("told it the lease of owner 00000000… on lock L is lost"));
        assert!(page.contains("fault f-cancel"), "the cancellation is drawn");
        assert!(
            page.contains(">w1:check<"),
            "the check's own calls have a lane"
        );
        assert!(page.contains("fill=\"#8e44ad\""), "the check call is drawn");
    }

    #[test]
    fn user_strings_render_as_text_never_as_markup() {
        let (events, input) = hostile();
        let page = render_timeline(&PackedHistory::pack(&History { events }), &input);
        assert!(!page.contains("<script>alert"), "raw script in page");
        assert!(!page.contains("<img"), "raw img in page");
        assert!(!page.contains("<b>seed"), "raw title markup");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("&lt;b&gt;seed&lt;/b&gt;"));
        // Only fencer's own script element is in the page.
        assert_eq!(page.matches("<script").count(), 1);
    }

    #[test]
    fn cited_events_are_marked_and_listed() {
        let (events, input) = hostile();
        let page = render_timeline(&PackedHistory::pack(&History { events }), &input);
        assert!(
            page.contains("class=\"t ev\" data-a=\"5.000\" data-event=\"1\" data-anomalies=\"0\""),
            "{page}"
        );
        assert!(page.contains("<li class=\"anomaly\" id=\"anomaly-0\">"));
        assert!(page.contains("evidence: #1"));
        assert!(!page.contains("id=\"windowed\""));
    }

    #[test]
    fn long_histories_are_drawn_around_their_anomalies_and_say_so() {
        let mut events = Vec::new();
        for n in 0..(MAX_DRAWN_OPS as u64 + 50) {
            events.push(ev(n * 100, "w1", EventType::Invoke, Op::Read));
            events.push(ev(n * 100 + 1, "w1", EventType::Ok, Op::Read));
        }
        let events = indexed(events);
        let cited = 2 * 9_000; // at 900 s; the run lasts about 1005 s
        let input = ReportInput {
            anomalies: vec![ReportAnomaly {
                class: "stale-write-accepted".into(),
                events: vec![cited],
                explanation: "x".into(),
                warning: false,
            }],
            ..ReportInput::default()
        };
        let page = render_timeline(&PackedHistory::pack(&History { events }), &input);
        assert!(page.contains("id=\"windowed\""), "no notice");
        assert!(page.contains("890.000s–910.000s"), "window not named");
        let drawn = page.matches("class=\"t call").count();
        assert!((190..=210).contains(&drawn), "{drawn} calls drawn");
        assert!(page.contains("data-event=\"18000\""));
    }

    #[test]
    fn anomalies_and_warnings_are_counted_apart() {
        let (events, mut input) = hostile();
        let mut warning = input.anomalies[0].clone();
        warning.class = "superseded-write-accepted".into();
        warning.warning = true;
        input.anomalies.extend([warning.clone(), warning]);
        let page = render_timeline(&PackedHistory::pack(&History { events }), &input);
        assert!(
            page.contains("<h2>Anomalies (1) and warnings (2)</h2>"),
            "{page}"
        );
        assert!(page.contains("<li class=\"anomaly warning\" id=\"anomaly-1\">"));
        assert!(page.contains("superseded-write-accepted (warning) · "));
    }

    #[test]
    fn a_log_read_back_after_the_run_is_drawn_at_no_time_and_told_by_its_order() {
        let mut invoke = ev(0, "w1", EventType::Invoke, Op::Write);
        invoke.write_id = Some("w1-0".into());
        invoke.token = Some(1);
        invoke.key = Some("k".into());
        let mut ok = invoke.clone();
        ok.kind = EventType::Ok;
        ok.time_ns = 9_000_000;
        // Read back once the run was over, at 12.889 s.
        let mut log = ev(12_889, "store", EventType::Log, Op::Write);
        log.write_id = Some("w1-0".into());
        log.token = Some(1);
        log.key = Some("k".into());
        log.seq = Some(1);
        let history = PackedHistory::pack(&History {
            events: indexed(vec![invoke, ok, log]),
        });
        let input = ReportInput {
            anomalies: vec![ReportAnomaly {
                class: "ack-mismatch".into(),
                events: vec![0, 2],
                explanation: "x".into(),
                warning: false,
            }],
            ..ReportInput::default()
        };
        let page = render_timeline(&history, &input);
        assert!(page.contains("id=\"read-back\""), "no notice");
        assert!(
            !page.contains("12.889"),
            "a read-back time was told:\n{page}"
        );
        assert!(!page.contains("data-event=\"2\""), "the entry was drawn");
        assert!(page.contains("ack-mismatch · 0.000s–0.000s"), "{page}");
    }

    #[test]
    fn cluster_members_get_lanes_with_their_faults_and_partition_sides() {
        let nemesis = |time_ms, f, target: &str| {
            let mut event = ev(time_ms, "nemesis", EventType::Nemesis, f);
            event.target = Some(target.into());
            event
        };
        let mut pause = nemesis(10, Op::ServerPause, "lock.n2");
        pause.duration_ns = Some(20_000_000);
        pause.value = Some("lock.leader".into());
        let resume = nemesis(30, Op::ServerResume, "lock.n2");
        let mut split = nemesis(40, Op::NetPartition, "lock");
        split.duration_ns = Some(50_000_000);
        split.value = Some("n1 n3 | n2 (leader n2)".into());
        let heal = nemesis(90, Op::HealNetPartition, "lock");
        let history = PackedHistory::pack(&History {
            events: indexed(vec![pause, resume, split, heal]),
        });
        let model = Model::new(&history);
        let names: Vec<&str> = model.lanes.iter().map(|lane| lane.name.as_str()).collect();
        assert_eq!(
            names,
            ["nemesis", "lock", "lock.n1", "lock.n2", "lock.n3", "store"]
        );
        let spans: Vec<(Op, &str, u64, u64)> = model
            .faults
            .iter()
            .map(|f| (f.f, f.target.as_str(), f.start_ns, f.end_ns))
            .collect();
        assert_eq!(
            spans,
            [
                (Op::ServerPause, "lock.n2", 10_000_000, 30_000_000),
                (Op::NetPartition, "lock", 40_000_000, 90_000_000),
            ]
        );
        let page = render_timeline(&history, &ReportInput::default());
        assert!(page.contains("side 1/2: n1 n3"), "{page}");
        assert!(page.contains("n2 on side 2/2: n2"), "{page}");
        assert!(
            page.contains("member n2 of the lock service (the leader)"),
            "{page}"
        );
        assert_eq!(
            page.matches("f-net-partition").count(),
            5,
            "nemesis, lock and 3 members"
        );
    }
}
