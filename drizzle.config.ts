import { defineConfig } from "drizzle-kit";

/** SQLite migrations of the storage plugin: `npm run db:generate` after editing the tables. */
export default defineConfig({
  dialect: "sqlite",
  schema: "./src/plugins/storage/sqlite/schema.ts",
  out: "./drizzle/sqlite",
});
