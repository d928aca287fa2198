import { createApp } from "./api/app";

export { TransportQueue } from "../durable-objects/transport-queue";
export { DestinationQueue } from "../durable-objects/destination-queue";

const app = createApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
} satisfies ExportedHandler<Env>;
