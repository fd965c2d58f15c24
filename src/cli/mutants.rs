//! `fencer mutants`: hunt every mutant of the zoo and print how fast each was caught.

use fencer_gate::mutants::{ZOO, hunt};

use super::{Failure, Outcome};

/// Hunts each mutant over seeds `0..cap`; exit 1 if any was not caught.
pub fn mutants(cap: u64) -> Outcome {
    if cap == 0 {
        return Err(Failure::BadInput("--cap must be at least 1".into()));
    }
    println!(
        "{:<22} {:<24} {:<22} {:>8} {:>8}",
        "mutant", "expected", "found", "seeds", "runs/s"
    );
    let mut escaped = Vec::new();
    for mutant in &ZOO {
        let hunt = hunt(mutant, cap).map_err(|error| Failure::Internal(error.to_string()))?;
        let (found, seeds) = match &hunt.caught {
            Some(catch) => (catch.classes.join(","), (catch.seed + 1).to_string()),
            None => {
                escaped.push(mutant.name);
                ("NOT CAUGHT".to_string(), format!(">{cap}"))
            }
        };
        println!(
            "{:<22} {:<24} {:<22} {:>8} {:>8.1}",
            mutant.name,
            mutant.expected_class,
            found,
            seeds,
            hunt.runs_per_s()
        );
    }
    if escaped.is_empty() {
        println!("every mutant caught within {cap} seeds");
        Ok(0)
    } else {
        println!("not caught within {cap} seeds: {}", escaped.join(", "));
        Ok(1)
    }
}
