import { defineConfig } from "drizzle-kit";

/** Postgres migrations of the storage plugin: `npx drizzle-kit generate --config drizzle.postgres.config.ts`. */
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/plugins/storage/postgres/schema.ts",
  out: "./drizzle/postgres",
});
