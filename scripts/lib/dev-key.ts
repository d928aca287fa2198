/** The local development key (local D1 only): fixed, so local tools and docs can rely on it. */
export const DEV_KEY = "co_dev_local_development_key_0000";
