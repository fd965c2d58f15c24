//! The recorder keeps a run in checking form (rows and interned strings), never as events: what
//! it hands back must be every event exactly as recorded, field by field, for a whole run of
//! each workload under every fault fencer can inject in simulation.

use fencer_harness::runtime::simulation_runtime;
use fencer_harness::{
    Event, History, LocalClock, NodeClock, PackedHistory, Recorder, TrueClock, Workload,
};
use fencer_nemesis::FaultKind;
use fencer_run::{Backends, Launch, Plan, Settings};

/// A whole run of `workload` with every fault family the simulation takes on, in checking form.
fn full_run(workload: Workload) -> PackedHistory {
    let plan = Plan::generate(&Settings {
        seed: 3,
        workers: 4,
        ops_per_worker: 12,
        workload,
        nemesis: FaultKind::ALL
            .into_iter()
            .filter(|kind| !kind.needs_private_server())
            .collect(),
        mean_fault_gap_ns: 2_000_000_000,
        ..Settings::default()
    });
    Launch::new(&Backends::new()).run(&plan).unwrap().history
}

/// Records `events` into a fresh recorder at their own true times, each with a local clock
/// reading its `local_ns` at that instant (or none), and returns what the recorder kept.
fn rerecorded(events: &[Event]) -> PackedHistory {
    simulation_runtime().block_on(async {
        let truth = TrueClock::start();
        let recorder = Recorder::new(truth);
        for event in events {
            fencer_harness::time::sleep_until(truth.instant_at(event.time_ns)).await;
            // `index` and `time_ns` are the recorder's to stamp: what it is given is ignored.
            let given = Event {
                index: u64::MAX,
                time_ns: u64::MAX,
                ..event.clone()
            };
            match event.local_ns {
                Some(local_ns) => {
                    let offset_ns = local_ns - event.time_ns as i64;
                    let clock = LocalClock::new(truth, NodeClock::with_offset(offset_ns));
                    recorder.record_on(given, &clock)
                }
                None => recorder.record(given),
            };
        }
        recorder.take_packed()
    })
}

#[test]
fn the_packed_recorder_gives_back_every_field_of_every_event_of_each_workload() {
    for workload in Workload::ALL {
        let packed = full_run(workload);
        let events = packed.unpack().events;
        assert!(events.len() > 300, "{workload:?}: a whole run");
        let columns = |event: &Event| {
            serde_json::to_value(event)
                .unwrap()
                .as_object()
                .unwrap()
                .len()
        };
        assert!(
            events.iter().map(columns).max() >= Some(10),
            "{workload:?}: events with many columns"
        );
        let again = rerecorded(&events);
        assert_eq!(again.len(), events.len());
        for (position, event) in events.iter().enumerate() {
            assert_eq!(&again.event(position), event, "{workload:?} #{position}");
        }
        // Written from rows and read back by serde (not by the packed reader), the events are
        // the ones unpacked: the rows' JSONL is the events' JSONL.
        let jsonl = packed.to_jsonl();
        assert_eq!(
            jsonl,
            History {
                events: events.clone()
            }
            .to_jsonl()
        );
        let read: Vec<Event> = jsonl
            .split(|&byte| byte == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| serde_json::from_slice(line).unwrap())
            .collect();
        assert_eq!(read, events, "{workload:?}");
        assert_eq!(again.sha256_hex(), packed.sha256_hex());
    }
}
