//! The cache's view for the lookups of one query
//! ([`DataSource::with_query_scope`]): the cache, with its misses read
//! through the wrapped source's own query view. sqlite3's view reads each
//! node once per query and keeps one snapshot, so the lookups of a query
//! that miss (a referral's answer, then each glue target's A and AAAA, all
//! walking through the same zone cut) read that cut once, not once per
//! lookup: uniform referrals through a cache holding 1% of the names ran at
//! 0.74x no cache before, every glue lookup reading the cut anew.

use std::sync::Arc;

use authd_datasrc::node::NodeStore;
use authd_datasrc::{
    CacheStats, DataSource, DataSourceError, Lookup, LookupOptions, Name, RRset, RType, ZoneRef,
    ZoneWriter,
};

use crate::HotSpotCache;

/// The cache over `inner`, the wrapped source's view for one query.
pub(crate) struct Scoped<'a> {
    cache: &'a HotSpotCache,
    inner: &'a dyn DataSource,
}

impl<'a> Scoped<'a> {
    pub(crate) fn new(cache: &'a HotSpotCache, inner: &'a dyn DataSource) -> Self {
        Scoped { cache, inner }
    }
}

impl DataSource for Scoped<'_> {
    fn describe(&self) -> String {
        self.cache.describe()
    }

    fn find_zone(&self, qname: &Name) -> Result<Option<ZoneRef>, DataSourceError> {
        // The zone table is the cache's, kept beside its slots.
        self.cache.find_zone(qname)
    }

    fn lookup(
        &self,
        zone: &ZoneRef,
        qname: &Name,
        qtype: RType,
        opts: LookupOptions,
    ) -> Result<Lookup, DataSourceError> {
        self.cache
            .lookup_via(self.inner, zone, qname, qtype, opts, true)
    }

    fn with_query_scope(
        &self,
        _f: &mut dyn FnMut(&dyn DataSource) -> Result<(), DataSourceError>,
    ) -> Option<Result<(), DataSourceError>> {
        // Already the scope of one query: scopes do not nest.
        None
    }

    fn begin_batch(&self) {
        self.cache.begin_batch();
    }

    fn end_batch(&self) {
        self.cache.end_batch();
    }

    fn zones(&self) -> Result<Vec<ZoneRef>, DataSourceError> {
        self.cache.zones()
    }

    fn zone_rrsets(&self, zone: &ZoneRef) -> Result<Vec<Arc<RRset>>, DataSourceError> {
        self.inner.zone_rrsets(zone)
    }

    fn generation(&self) -> u64 {
        self.cache.generation()
    }

    fn immutable_rrsets(&self) -> bool {
        self.cache.immutable_rrsets()
    }

    fn additional_addresses(
        &self,
        zone: &ZoneRef,
        rrset: &Arc<RRset>,
    ) -> Result<Option<Arc<[Arc<RRset>]>>, DataSourceError> {
        self.cache.additional_via(self.inner, zone, rrset)
    }

    fn with_node_store(
        &self,
        _zone: &ZoneRef,
        _f: &mut dyn FnMut(&dyn NodeStore) -> Result<Lookup, DataSourceError>,
    ) -> Option<Result<Lookup, DataSourceError>> {
        // As the cache's own: its node view lives for one lookup.
        None
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        self.cache.cache_stats()
    }

    fn flush_cache(&self) {
        self.cache.flush_cache();
    }

    fn writer(&self) -> Option<Arc<dyn ZoneWriter>> {
        self.cache.writer()
    }
}
