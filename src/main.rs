use anyhow::Result;
use clap::Parser;

use kumaco::cli::{Cli, Command};

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(_args) => {
            anyhow::bail!("kumaco run: the controller is not implemented yet")
        }
    }
}
