/**
 * The part of autocannon's API that bench-accept uses (the package ships no type declarations).
 */
declare module "autocannon" {
  interface Options {
    url: string;
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
    duration?: number;
  }
  interface Histogram {
    average: number;
    p50: number;
    p99: number;
    max: number;
  }
  interface Result {
    duration: number;
    requests: Histogram & { total: number };
    latency: Histogram;
    "2xx": number;
    non2xx: number;
    errors: number;
    timeouts: number;
  }
  function autocannon(opts: Options): Promise<Result>;
  export default autocannon;
}
