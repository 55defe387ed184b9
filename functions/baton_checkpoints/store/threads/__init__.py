"""LangGraph threads in the table: checkpoints, their channel values and pending writes in one partition per thread.

Items of a thread (keys in `layout`, attribute names in `store/thread_names.py`):

- the head (`H`): the thread's generation `g`, time to live and expiry, and when it was last deleted (`fl`). A put
  touches it once in a while (the container remembers it: `heads.Heads.for_put`); a read finds
  nothing unless it is there and not expired, and shows nothing put before `fl`. A thread written again after an
  expiry gets a new generation, so no item of its former life is read again (the reaper removes those).
- a checkpoint (`K#<ns>#<id>`): the checkpoint and its metadata (compact JSON, packed when that pays), its parent,
  the channel values of at most `thread_puts.INLINE_VALUE_BYTES` (`iv`: carried from the parent into every child that
  keeps their version), the versions and sizes of the larger ones (`vz`, with the id of the checkpoint that holds
  a value in its item), the large values new in it that ride in its item (`hv`), and its pending writes: one
  attribute per `put_writes` call (`w:<digest>`), set by one conditional UpdateItem. Writes that come before their
  checkpoint make the item (with a day's TTL that the put lifts); a deleted thread's checkpoints become tombstones
  (`dead`) that refuse late writes.
- a value (`V#<g>#<ns>#<channel>#<version>`): one version of a channel too large to ride in its checkpoint's item,
  written once, packed when that pays, its bytes in the bucket (`so`) when they would not fit an item.
- a write value (`W#<ns>#<checkpoint>#<digest>`): a pending write too large to ride in its call, named by its content.

Values and write values are written before the checkpoint item that references them, so a failure half way leaves
unreferenced items, never a checkpoint without its values.

A put and a put_writes are planned in the domain (`domain/thread_puts.py`: what they store, and where each value
goes); the store carries the plan out. One module per job: `items` (what the items hold, read and written without
AWS), `heads` (touching and reading a thread's head), `writes` (put and put_writes), `reads` (a checkpoint, and pages
of them under a read budget), `upkeep` (delete, prune, copy, deletes for runs), `blobs` (the blobs a write names,
checked once each), and `repository` (`ThreadStore`, what the routes hold: each request on one `ThreadRef`).
"""

from baton_checkpoints.store.threads.repository import ThreadStore

__all__ = ["ThreadStore"]
