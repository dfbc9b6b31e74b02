use std::process::ExitCode;

fn main() -> ExitCode {
    egress_proxy_operator::cli::main()
}
