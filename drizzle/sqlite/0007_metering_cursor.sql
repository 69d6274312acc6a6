CREATE TABLE `metering_cursor` (
	`id` integer PRIMARY KEY NOT NULL,
	`seq` integer NOT NULL
);
