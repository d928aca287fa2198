/*
 * NAME
 *   peer - the peers of a job: one per destination queue it has entries in (after Postfix
 *   nqmgr qmgr_peer.c)
 * DESCRIPTION
 *   findPeer() finds the job's peer for a queue; obtainPeer() finds or creates it, and
 *   freePeer() removes one with no entries left: the jobs' peer lists (queue.ts keeps the
 *   peers' todo lists). rotatePeerToTail() is the round-robin step.
 */
import type { Job, Peer, Queue } from "./model";

/** The job's live peer for a queue, if any (map if built, else a scan of its peer list). */
export function findPeer(job: Job, queue: Queue): Peer | undefined {
  if (job.peerByQueue) return job.peerByQueue.get(queue);
  for (let p = job.peerHead; p; p = p.next) if (p.queue === queue) return p;
  return undefined;
}

/** Finds or creates the peer of (job, queue) during assignment batch `batch`. */
export function obtainPeer(job: Job, queue: Queue, batch: number): Peer {
  if (!job.peerByQueue) {
    if (job.peerHead === null) job.peerBatch = batch;
    if (job.peerBatch === batch) {
      // Same batch: recipients come sorted by queue, so only the last peer can match.
      const last = job.peerTail;
      if (last && last.queue === queue) return last;
      return appendPeer(job, queue);
    }
    job.peerByQueue = new Map();
    for (let p = job.peerHead; p; p = p.next) job.peerByQueue.set(p.queue, p);
  }
  const found = job.peerByQueue.get(queue);
  if (found) return found;
  const peer = appendPeer(job, queue);
  job.peerByQueue.set(queue, peer);
  return peer;
}

function appendPeer(job: Job, queue: Queue): Peer {
  const peer: Peer = { job, queue, todoHead: null, todoTail: null, refcount: 0, prev: job.peerTail, next: null };
  if (job.peerTail) job.peerTail.next = peer;
  else job.peerHead = peer;
  job.peerTail = peer;
  return peer;
}

/** Removes a peer that has no entries left. */
export function freePeer(peer: Peer): void {
  const job = peer.job;
  if (peer.prev) peer.prev.next = peer.next;
  else job.peerHead = peer.next;
  if (peer.next) peer.next.prev = peer.prev;
  else job.peerTail = peer.prev;
  peer.prev = peer.next = null;
  job.peerByQueue?.delete(peer.queue);
}

/** Moves a chosen peer to the back of its job's peer list (round robin). */
export function rotatePeerToTail(peer: Peer): void {
  const job = peer.job;
  if (job.peerTail === peer) return;
  if (peer.prev) peer.prev.next = peer.next;
  else job.peerHead = peer.next;
  peer.next!.prev = peer.prev;
  peer.prev = job.peerTail;
  peer.next = null;
  job.peerTail!.next = peer;
  job.peerTail = peer;
}
