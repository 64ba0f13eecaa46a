#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    graft::cli::main()
}
