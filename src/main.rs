//! The `corral` command line: the core's verbs for people and scripts, the
//! MCP server, and the hidden `shepherd` mode each run is supervised by.

mod cli;

fn main() {
    std::process::exit(cli::main());
}
