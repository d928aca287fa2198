/**
 * The meter's public surface (meter.ts says what is counted, where and why; invocations.ts counts
 * the Worker's invocations, registry.ts holds the counters, d1.ts and sql.ts wrap D1 and Durable
 * Object storage, activity.ts clocks Durable Object duration, objects.ts applies the meter around
 * each class and the Worker entry).
 */
export { BINDINGS, meterEnv, meterNamespace, meterStub, queueOps } from "./meter";
export { meterEmail, meterFetch, meterOn, meterQueue, meterScheduled } from "./invocations";
export { meterQuietly, meterReset, meterSnapshot, type DoClass, type MeterSnapshot } from "./registry";
export { meterD1, recordD1 } from "./d1";
export { MeteredCursor, meterCtx, meterSql, meterStorage, sqlRowCounts, STORAGE_METHODS } from "./sql";
export { meterClass, meterWorker } from "./objects";
