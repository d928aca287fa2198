/** A sending domain's DNS records and their status, as Resend's /domains shows them. */

export type RecordStatus = "not_started" | "pending" | "verified" | "failed" | "temporary_failure";
export type DomainStatus =
  "not_started" | "pending" | "verified" | "failed" | "partially_verified" | "partially_failed";

export interface DomainRecord {
  record: "DKIM" | "SPF" | "DMARC";
  name: string;
  type: "TXT" | "MX";
  value: string;
  ttl: string;
  status: RecordStatus;
  priority?: number;
}
