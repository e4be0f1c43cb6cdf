//! The `slidelog` binary: parse the command line and hand over to the library.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    slidelog_server::cli::main()
}
