//! One fault episode, drawn from the seed (see the binary's docs for the kinds), with
//! the nodes that go down beside it.

use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use testkit::chaos::lifecycle::Outage;
use testkit::faultproxy::Fault;
use testkit::fleet::ZONES;

use crate::replicas::Signal;
use crate::run::Driver;
use crate::{Kind, ZONE_OUTAGE_CHANCE};

impl Driver<'_> {
    /// One fault episode, drawn from the seed.
    pub(crate) async fn episode(&mut self) -> Result<()> {
        self.tally.episodes += 1;
        let kind = match self.args.kinds.len() {
            0 => {
                let drawn = Kind::ALL[self.rng.weighted(&Kind::WEIGHTS)];
                if self.tally.episodes.is_multiple_of(Kind::CRASH_EVERY) {
                    Kind::ApiCrash
                } else {
                    drawn
                }
            }
            n => self.args.kinds[(self.tally.episodes as usize - 1) % n],
        };
        let edit = self.rng.chance(0.4);
        // 0.5 gave 90 kills in a 60-minute run (seed 842884876), short of the 100 a long
        // run is to reach; 0.8 adds about 25.
        let extra_kill = self.rng.chance(0.8);
        let began = Instant::now();
        let mut notes = Vec::new();
        // Draws that do not depend on what the cluster does, so a replay stays in step.
        let hold = self
            .rng
            .duration(Duration::from_secs(5), Duration::from_secs(20));
        let pick = self.rng.below(self.replicas.len());
        let signal = if self.rng.chance(0.7) {
            Signal::Kill
        } else {
            Signal::Term
        };
        // Nodes going down with the fault, and coming back on their own time.
        let outages = Outage::draw(
            &mut self.rng,
            self.nodes.len(),
            ZONES.len(),
            ZONE_OUTAGE_CHANCE,
        );
        self.start_outages(&outages, &mut notes);
        let fault = match kind {
            // The leader, just after a window edge.
            Kind::LeaderMidEdge => {
                let after = self
                    .rng
                    .duration(Duration::ZERO, Duration::from_millis(800));
                self.until_edge(after).await;
                let id = self.checker.fault_started("leader killed mid-edge");
                if let Some(i) = self.leader() {
                    self.kill(i, Signal::Kill).await?;
                    self.tally.leader_kills += 1;
                    self.tally.mid_edge += 1;
                    notes.push(format!("SIGKILL leader r{i} mid-edge"));
                }
                id
            }
            // The leader, just after one of its writes.
            Kind::LeaderMidWrite => {
                let wrote = self.checker.next_write(Duration::from_secs(60)).await;
                let id = self.checker.fault_started("leader killed mid-write");
                if let Some(i) = self.leader() {
                    self.kill(i, Signal::Kill).await?;
                    self.tally.leader_kills += 1;
                    self.tally.mid_write += u64::from(wrote);
                    notes.push(format!("SIGKILL leader r{i} mid-write"));
                }
                id
            }
            // A random replica, SIGKILL or SIGTERM.
            Kind::Replica => {
                let id = self.checker.fault_started("replica killed");
                self.kill(pick, signal).await?;
                notes.push(format!("{signal:?} r{pick}"));
                id
            }
            // The leader, then its successor as soon as it leads.
            Kind::DoubleKill => {
                let id = self.checker.fault_started("two leaders killed");
                for _ in 0..2 {
                    if let Ok(i) = self.wait_for_leader(Duration::from_secs(30)).await {
                        self.kill(i, Signal::Kill).await?;
                        self.tally.leader_kills += 1;
                        notes.push(format!("SIGKILL leader r{i}"));
                    }
                }
                id
            }
            // The API server and etcd, also across an edge.
            Kind::ApiCrash => {
                let across = self.rng.chance(0.5);
                let down = self
                    .rng
                    .duration(Duration::from_secs(2), Duration::from_secs(8));
                if across {
                    // Down from just before the edge until after it.
                    if let Some(edge) = self.checker.next_edge() {
                        let wait = edge.duration_since(Timestamp::now())
                            - SignedDuration::try_from(down / 2).unwrap_or_default();
                        tokio::time::sleep(Duration::try_from(wait).unwrap_or_default()).await;
                    }
                    self.tally.api_crashes_across_edge += 1;
                }
                let id = self.checker.fault_started("API server crash");
                tokio::task::block_in_place(|| self.server.kill());
                tokio::time::sleep(down).await;
                tokio::task::block_in_place(|| self.server.restart())?;
                self.tally.api_crashes += 1;
                notes.push(format!(
                    "API server SIGKILLed, down {:.1}s{}",
                    down.as_secs_f64(),
                    if across { " across an edge" } else { "" }
                ));
                id
            }
            // A proxy fault on the leader or another replica.
            Kind::Proxy => {
                let faults = [
                    Fault::Latency(
                        self.rng
                            .duration(Duration::from_millis(100), Duration::from_millis(1500)),
                    ),
                    Fault::Stall,
                    Fault::ResetMidResponse,
                    Fault::Blackhole,
                ];
                let f = self.rng.below(faults.len());
                let target = if self.rng.chance(0.6) {
                    self.leader().unwrap_or(pick)
                } else {
                    pick
                };
                let label = format!("{:?}", faults[f]);
                let name = label.split('(').next().unwrap_or_default().to_string();
                let id = self.checker.fault_started("proxy fault");
                self.replicas[target].proxy.set(faults[f].clone());
                notes.push(format!(
                    "proxy {label} on r{target} for {:.0}s",
                    hold.as_secs_f64()
                ));
                tokio::time::sleep(hold).await;
                self.replicas[target].proxy.set(Fault::None);
                *self.tally.proxy_faults.entry(name).or_default() += 1;
                id
            }
            // The leader partitioned from the API server, the others not.
            Kind::Partition => {
                let target = self.leader().unwrap_or(pick);
                let id = self.checker.fault_started("partition");
                self.replicas[target].proxy.set(Fault::Partition);
                notes.push(format!(
                    "r{target} partitioned for {:.0}s",
                    hold.as_secs_f64()
                ));
                tokio::time::sleep(hold).await;
                self.replicas[target].proxy.set(Fault::None);
                self.tally.partitions += 1;
                id
            }
            // Replica 0's wall clock steps, most times while it leads.
            Kind::ClockJump => {
                let make_leader = self.rng.chance(0.6);
                let step = [3600, -3600, 600, -600, 86_400][self.rng.below(5)];
                let id = self.checker.fault_started("clock jump");
                if make_leader {
                    for _ in 0..self.replicas.len() {
                        match self.wait_for_leader(Duration::from_secs(30)).await {
                            Ok(0) | Err(_) => break,
                            Ok(i) => {
                                self.kill(i, Signal::Term).await?;
                                self.tally.leader_kills += 1;
                                notes.push(format!("SIGTERM leader r{i}"));
                            }
                        }
                    }
                }
                let clock = self.replicas[0].clock.as_mut().expect("replica 0's clock");
                clock.set_offset(step)?;
                notes.push(format!(
                    "r0's clock {step:+}s for {:.0}s",
                    hold.as_secs_f64()
                ));
                tokio::time::sleep(hold).await;
                let clock = self.replicas[0].clock.as_mut().expect("replica 0's clock");
                clock.set_offset(0)?;
                // libfaketime reads the file again within a second.
                tokio::time::sleep(Duration::from_secs(1)).await;
                self.tally.clock_jumps += 1;
                id
            }
        };
        if edit {
            notes.push(format!("edit {}", self.edit_windows().await?));
        }
        if extra_kill
            && let Some(i) = (0..self.replicas.len())
                .map(|k| (pick + k) % self.replicas.len())
                .find(|&i| self.replicas[i].process.is_some() && Some(i) != self.leader())
        {
            self.kill(i, Signal::Kill).await?;
            notes.push(format!("SIGKILL r{i}"));
        }
        // Killed replicas come back after a pod's restart delay.
        tokio::time::sleep(Duration::from_secs(2)).await;
        self.restart_down().await;
        self.restart_controller_manager();
        self.checker.fault_ended(fault);
        self.tally.fault_seconds += began.elapsed().as_secs_f64();
        self.say(&format!(
            "episode {}: {}",
            self.tally.episodes,
            notes.join("; ")
        ));
        Ok(())
    }

    /// Starts `outages` in the background (none is a fault for the checker: kumaco must
    /// keep every promise while nodes come and go).
    pub(crate) fn start_outages(&mut self, outages: &[Outage], notes: &mut Vec<String>) {
        self.outages.retain(|h| !h.is_finished());
        if outages.len() > 3 {
            self.tally.zone_outages += 1;
        }
        let mut said = Vec::new();
        for outage in outages {
            let name = self.nodes[outage.node].0.clone();
            *self
                .tally
                .outages
                .entry(outage.down.name().to_string())
                .or_default() += 1;
            said.push(format!(
                "{} {} {:.0}s",
                name.rsplit('-').next().unwrap_or_default(),
                outage.down.name(),
                outage.length.as_secs_f64()
            ));
            self.outages.push(outage.spawn(self.client.clone(), name));
        }
        notes.push(format!("down: {}", said.join(", ")));
    }
}
