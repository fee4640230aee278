//! The node map of a memory snapshot: owner name (case-insensitive) to
//! [`Node`], in a few hash tables (shards) sized together so that few
//! buckets stand empty.
//!
//! One swiss table holds at most 7/8 of its buckets and has a power of two
//! of them, so one table for 500,003 owners (a 300,000-delegation TLD) takes
//! 2^20 buckets of 96 bytes and leaves half of them empty: 50 MiB of the
//! snapshot. Nine tables of 2^16 buckets hold the same owners in 56% of the
//! buckets. A lookup hashes the name once, picks the shard from bits of that
//! hash the tables do not use (they take the low bits for the bucket and the
//! top seven for the control byte), and probes that one table: the same
//! probe as one table's, and no extra memory read (the shard array is one
//! cache line).

use std::hash::BuildHasher;

use hashbrown::HashTable;

use crate::name::Name;
use crate::node::Node;

/// Most shards a map is made of.
const MAX_SHARDS: usize = 16;

/// Maps for fewer owner names are one table: their memory is not at stake.
const SHARD_FROM: usize = 1 << 16;

/// Owner name to node; see the module docs.
pub struct NodeMap {
    /// Keys here are zone data, not chosen by clients: foldhash is several
    /// times faster than SipHash on short keys.
    hasher: foldhash::fast::RandomState,
    shards: Box<[HashTable<(Name, Node)>]>,
}

impl std::fmt::Debug for NodeMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Default for NodeMap {
    fn default() -> NodeMap {
        NodeMap::with_capacity(0)
    }
}

/// Buckets a swiss table takes for `capacity` entries (hashbrown's rule: a
/// power of two, at most 7/8 of it used; 4 or 8 when small).
fn buckets_for(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        1..4 => 4,
        4..8 => 8,
        _ => (capacity.saturating_mul(8) / 7).next_power_of_two(),
    }
}

/// The shard count, 1 to [`MAX_SHARDS`], whose tables take the fewest buckets
/// in all for `owners` owner names (the fewest shards among equals); 1 under
/// [`SHARD_FROM`].
fn shards_for(owners: usize) -> usize {
    if owners < SHARD_FROM {
        return 1;
    }
    (1..=MAX_SHARDS)
        .min_by_key(|&k| (k * buckets_for(owners.div_ceil(k)), k))
        .unwrap_or(1)
}

impl NodeMap {
    /// A map made for `owners` owner names (it grows past them, shard by
    /// shard, as any hash table).
    pub fn with_capacity(owners: usize) -> NodeMap {
        let k = shards_for(owners);
        let per = owners.div_ceil(k);
        NodeMap {
            hasher: foldhash::fast::RandomState::default(),
            shards: (0..k).map(|_| HashTable::with_capacity(per)).collect(),
        }
    }

    /// The name's hash and the index of its shard.
    #[inline]
    fn place(&self, name: &Name) -> (u64, usize) {
        let hash = self.hasher.hash_one(name);
        // Bits 25..57: neither the bucket bits (low, up to 2^25 buckets a
        // shard) nor the control byte's (the top seven). Lemire's
        // multiply-shift maps them onto 0..k without a division.
        let mid = (hash >> 25) & 0xffff_ffff;
        let shard = ((mid * self.shards.len() as u64) >> 32) as usize;
        (hash, shard)
    }

    /// The node at `name`, if any.
    #[inline]
    pub fn get(&self, name: &Name) -> Option<&Node> {
        let (hash, shard) = self.place(name);
        self.shards
            .get(shard)?
            .find(hash, |(k, _)| k == name)
            .map(|(_, n)| n)
    }

    /// The node at `name`, if any, to change.
    pub fn get_mut(&mut self, name: &Name) -> Option<&mut Node> {
        let (hash, shard) = self.place(name);
        self.shards
            .get_mut(shard)?
            .find_mut(hash, |(k, _)| k == name)
            .map(|(_, n)| n)
    }

    /// The node at `name`, an empty one inserted first when there is none.
    pub fn get_or_default(&mut self, name: &Name) -> &mut Node {
        let (hash, shard) = self.place(name);
        let hasher = &self.hasher;
        let table = &mut self.shards[shard];
        let entry = table.entry(hash, |(k, _)| k == name, |(k, _)| hasher.hash_one(k));
        &mut entry
            .or_insert_with(|| (name.clone(), Node::default()))
            .into_mut()
            .1
    }

    /// Every owner name and its node, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Name, &Node)> {
        self.shards
            .iter()
            .flat_map(|t| t.iter().map(|(k, n)| (k, n)))
    }

    /// Every owner name, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &Name> {
        self.iter().map(|(k, _)| k)
    }

    /// Every node, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &Node> {
        self.iter().map(|(_, n)| n)
    }

    /// Every node, to change, in no particular order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Node> {
        self.shards
            .iter_mut()
            .flat_map(|t| t.iter_mut().map(|(_, n)| n))
    }

    /// Keeps the nodes for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&Node) -> bool) {
        for t in self.shards.iter_mut() {
            t.retain(|(_, n)| keep(n));
        }
    }

    /// How many owner names.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards.iter().map(HashTable::len).sum()
    }

    /// Buckets of all shards together (what the map's memory is made of).
    #[cfg(test)]
    fn buckets(&self) -> usize {
        self.shards.iter().map(|t| buckets_for(t.capacity())).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        s.parse().expect("name")
    }

    /// 500,003 owners (a 300,000-delegation TLD) in nine shards of 2^16
    /// buckets, not one table of 2^20; small maps stay one table.
    #[test]
    fn shards_leave_few_buckets_empty() {
        assert_eq!(shards_for(500_003), 9);
        assert_eq!(9 * buckets_for(500_003usize.div_ceil(9)), 589_824);
        assert_eq!(buckets_for(500_003), 1 << 20);
        assert_eq!(shards_for(0), 1);
        assert_eq!(shards_for(3), 1);
        assert_eq!(shards_for(60_000), 1);
        // 1M delegations: fifteen shards of 2^17, not one table of 2^21.
        assert_eq!(shards_for(1_666_669), 15);
        let map = NodeMap::with_capacity(500_003);
        assert_eq!(map.shards.len(), 9);
        assert!(map.buckets() <= 589_824, "{}", map.buckets());
    }

    /// Lookups ignore case, find every name inserted in any shard, and
    /// nothing else; growth past the capacity keeps every node.
    #[test]
    fn finds_every_owner_in_any_case() {
        let mut map = NodeMap::with_capacity(SHARD_FROM);
        assert!(map.shards.len() > 1, "a map of several shards under test");
        for i in 0..3_000 {
            map.get_or_default(&name(&format!("d{i}.Tld.")))
                .additional
                .clear();
        }
        assert_eq!(map.len(), 3_000);
        for i in 0..3_000 {
            assert!(map.get(&name(&format!("D{i}.tLD."))).is_some(), "d{i}");
        }
        assert!(map.get(&name("d3000.tld.")).is_none());
        assert!(map.get_mut(&name("d7.tld.")).is_some());
        // Inserting an existing name (other case) adds nothing.
        map.get_or_default(&name("D7.TLD."));
        assert_eq!(map.len(), 3_000);
        assert_eq!(map.keys().count(), 3_000);
        map.retain(|_| false);
        assert_eq!(map.len(), 0);
    }
}
