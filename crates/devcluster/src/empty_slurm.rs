//! Fake Slurm client commands for a daemon run without a slurmctld: a Slurm with nothing in it.

use std::path::Path;

/// Writes fake `scontrol`, `sinfo` and `squeue` into `bin_dir` that answer like a Slurm 22.05 with no
/// nodes, no reservations and no jobs, and accept every update: a daemon pointed at them reads
/// Slurm and its passes are not degraded (so empty MIGs may be collected), with no slurmctld. Each
/// script is written beside its place and renamed over it, so a daemon running them meanwhile never
/// sees half a file.
pub fn write_empty_slurm(bin_dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(bin_dir)?;
    let scripts = [
        (
            "scontrol",
            "#!/bin/sh\ncase \"$*\" in\n  --version) echo 'slurm 22.05.8' ;;\n  *reservation*) echo 'No reservations in the system' ;;\nesac\nexit 0\n",
        ),
        ("sinfo", "#!/bin/sh\necho '{\"meta\":{},\"errors\":[],\"nodes\":[]}'\n"),
        ("squeue", "#!/bin/sh\necho '{\"meta\":{},\"errors\":[],\"jobs\":[]}'\n"),
    ];
    for (cmd, text) in scripts {
        let p = bin_dir.join(cmd);
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, text)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
        std::fs::rename(&tmp, &p)?;
    }
    Ok(())
}
