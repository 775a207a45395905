import { Module } from '@nestjs/common';
import { FencingModule } from '../fencing/fencing.module.js';
import { RetentionService } from './retention.service.js';

@Module({ imports: [FencingModule], providers: [RetentionService], exports: [RetentionService] })
export class RetentionModule {}
