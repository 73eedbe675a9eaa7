//! Free TCP ports for a cluster's slurmctld and slurmds, held until Slurm is handed them.

use crate::DevclusterError;

/// Finds `count` consecutive free TCP ports by binding them all (on all addresses, as slurmctld
/// and slurmd do). The listeners are returned so the ports stay ours until the caller is ready
/// to hand them to Slurm. The start is random, so concurrent clusters rarely even collide.
pub(crate) fn free_port_block(count: usize) -> Result<(u16, Vec<std::net::TcpListener>), DevclusterError> {
    use rand::Rng;
    const LOW: u16 = 20_000;
    const HIGH: u16 = 32_000; // below Linux's default ephemeral range (32768-60999)
    if count == 0 || count > usize::from(HIGH - LOW) {
        return Err(DevclusterError::NoFreePorts(count));
    }
    let mut rng = rand::thread_rng();
    for _ in 0..200 {
        let base = rng.gen_range(LOW..HIGH - count as u16);
        let listeners: Result<Vec<_>, _> =
            (0..count as u16).map(|i| std::net::TcpListener::bind(("0.0.0.0", base + i))).collect();
        if let Ok(listeners) = listeners {
            return Ok((base, listeners));
        }
    }
    Err(DevclusterError::NoFreePorts(count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_blocks_are_free_and_consecutive() {
        let (base, held) = free_port_block(5).unwrap();
        assert_eq!(held.len(), 5);
        assert!(std::net::TcpListener::bind(("0.0.0.0", base + 2)).is_err());
        drop(held);
        assert!(std::net::TcpListener::bind(("0.0.0.0", base + 2)).is_ok());
        assert!(free_port_block(0).is_err());
    }
}
