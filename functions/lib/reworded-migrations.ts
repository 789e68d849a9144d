/**
 * Applied migration files whose comments were corrected after a database recorded the
 * SHA-256 of their whole text. Each entry is that earlier text's checksum and its
 * statements' checksum; the runner accepts the old record only while the file's statements
 * still have that checksum (functions/lib/migrate.ts), and test/unit/migrations.test.ts
 * checks every entry against today's file.
 */
export interface RewordedMigration {
  /** The SHA-256 of the earlier whole text, as a database recorded it. */
  textChecksum: string;
  /** checksumOf the earlier text: today's file must have the same statements. */
  checksum: string;
}

export const REWORDED_MIGRATIONS: ReadonlyMap<string, RewordedMigration> = new Map<string, RewordedMigration>([
  // Comments that named documents outside the repository, or files since moved.
  [
    '0001_integration_inbox.sql',
    {
      textChecksum: 'adbc8ac1ab9f1f9c4b39c75a15a39e0d8a9721dff5f9fec9196f5519ee3f6f4a',
      checksum: 'statements-sha256:c66aa00e3f59009f39aa65a6b9dd9b3adf00a1d5fe3447e385920ddfc6b02d74',
    },
  ],
  [
    '0002_domain_tables.sql',
    {
      textChecksum: '3fbbdcfbf4a896fbc70ea36c6dc19ae68a9c7c239905013910eaab69ca4f1825',
      checksum: 'statements-sha256:aabfc084f863a1e628682f811a08debf6d3f94cfa3767c682f37c4b19adec375',
    },
  ],
  [
    '0003_inbox_extensions.sql',
    {
      textChecksum: '662c58766b1c5edbe475ff2476a2146934f9d1ee68093cd2a98e027f8103f852',
      checksum: 'statements-sha256:7dadcdcb67ef067dca906c5131bba30a919b82fa72afb9c000ea36392fbe9fef',
    },
  ],
  [
    '0030_reaper_retention.sql',
    {
      textChecksum: 'eb1c003f510656bff506ceb3ff7c5839cb35789d61ca06739bc9721ebbc30d63',
      checksum: 'statements-sha256:24d65b8e31de8b820dee70ffc6789bef88c6b6d08435a8dc78412731e1438b68',
    },
  ],
  [
    '0050_claim_lanes.sql',
    {
      textChecksum: '41c22901b8a170791ac29caf09714708391d65a1a7ff7661d33009028b442398',
      checksum: 'statements-sha256:4a6e035c598566dfab8896036c710ee1b976f3da8983b6bc678b5f06d04d8c3a',
    },
  ],
  [
    '0060_worker_slots.sql',
    {
      textChecksum: '028d23d06e195cbf313a8dfb39d2fe350d8eb8ef4ac7bdee48e66861717211b9',
      checksum: 'statements-sha256:6921302cc8f0ce622da9ae42c64d8eaf35b6e925b4313993bcfcbb95d847e52b',
    },
  ],
  [
    '0080_case_audit.sql',
    {
      textChecksum: '5283a882ce55a34567991616b805c04e12d36e1ab16ba1b0bb58db4c7dc5de31',
      checksum: 'statements-sha256:436f0d9f280b88e66018e52bfca9787d3ae74afba590abbbc4e1edcf30ddb8b9',
    },
  ],
  [
    '0081_outbox.sql',
    {
      textChecksum: 'b53dcb7d221049bdadd0a03083ec907ebcf288f1df03caf09c0566e81ef19be9',
      checksum: 'statements-sha256:4b4626853a0560345dbab9c31209cb344bacafa9303b33d48b0abe8f4e824053',
    },
  ],
  [
    '0100_operator_control.sql',
    {
      textChecksum: '437bde4417e5cd2a20d94b213d3d78ce685e49a9041e82ec0f0e47a400e46b7f',
      checksum: 'statements-sha256:5437d32274df7d8974dd63aba4dfc043938ed328ae5804899cc5d14d1ba1f217',
    },
  ],
  [
    '0110_consumed_events.sql',
    {
      textChecksum: '58ef044c1b6fdb2ff4f89fe7cb3710e74c51a3f9971b2d336e72ff7afe06ce5f',
      checksum: 'statements-sha256:13989ab273742667337e7d6558b197da060c599a0439212ac952e32ae140ad78',
    },
  ],
]);
