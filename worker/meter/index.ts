/**
 * The meter's public surface (meter.ts says what is counted, where and why; registry.ts holds the
 * counters, d1.ts and sql.ts wrap D1 and Durable Object storage).
 */
export { meterAlarm, meterEmail, meterEnv, meterFetch, meterNamespace, meterOn, meterQueue, meterScheduled, meterStub, queueOps } from "./meter";
export { meterQuietly, meterReset, meterSnapshot, type DoClass, type MeterSnapshot } from "./registry";
export { meterD1, recordD1 } from "./d1";
export { MeteredCursor, meterCtx, meterObject, meterSql, sqlRowCounts } from "./sql";
