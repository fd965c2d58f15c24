//! The `fencer` command line.

fn main() -> std::process::ExitCode {
    fencer::main()
}
